"""`qatune`: serve, worker, train, ask, device, create-user."""

import argparse
import getpass
import json
import sys
from pathlib import Path
from typing import Any

from app.core.config import get_settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="qatune", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="start the API, the UI and the embedded worker")
    serve.add_argument("--host", default=None)
    serve.add_argument("--port", type=int, default=None)

    commands.add_parser("worker", help="run only the worker (no API), claiming queued jobs")

    create_user = commands.add_parser("create-user", help="create a user (asks for the password)")
    create_user.add_argument("username")
    create_user.add_argument("--admin", action="store_true")
    create_user.add_argument("--password-stdin", action="store_true")

    device = commands.add_parser("device", help="the device, precision and memory training uses")
    device.add_argument("--json", action="store_true")
    device.add_argument("--benchmark", action="store_true", help="time training on each device")
    device.add_argument("--model", default="builtin:tiny", help="model to benchmark")

    train = commands.add_parser("train", help="train an adapter from a file, without the service")
    train.add_argument("--base-model", default=None)
    train.add_argument("--data", type=Path, required=True, help="JSONL, JSON or CSV of QA pairs")
    train.add_argument("--output", type=Path, required=True, help="directory for the adapter")
    train.add_argument("--epochs", type=int)
    train.add_argument("--max-steps", type=int)
    train.add_argument("--batch-size", type=int, help="examples per optimizer step")
    train.add_argument("--learning-rate", type=float)
    train.add_argument("--lora-rank", type=int)
    train.add_argument("--lora-alpha", type=int)
    train.add_argument("--lora-dropout", type=float, help="dropout on the LoRA input (auto: 0)")
    train.add_argument("--lora-target-modules", default=None, help="all-linear or a,b,c")
    train.add_argument("--max-seq-length", type=int)
    train.add_argument(
        "--validation-split", type=float, help="share held out for evaluation (auto: 0.1 from 100)"
    )
    train.add_argument("--precision", choices=["auto", "bf16", "fp16", "fp32"])
    train.add_argument("--seed", type=int)
    train.add_argument("--metrics-json", type=Path, help="write the run's metrics here")

    ask = commands.add_parser("ask", help="ask a trained adapter a question, without the service")
    ask.add_argument("--adapter", type=Path, required=True, help="directory `qatune train` wrote")
    ask.add_argument("question")
    ask.add_argument("--max-new-tokens", type=int, default=256)
    ask.add_argument("--temperature", type=float, default=0.0)

    args = parser.parse_args(argv)
    handler = {
        "serve": _serve,
        "worker": _worker,
        "create-user": _create_user,
        "device": _device,
        "train": _train,
        "ask": _ask,
    }[args.command]
    try:
        return handler(args)
    except StartupError as exc:
        print(f"qatune: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


class StartupError(Exception):
    """Settings or hardware that cannot work: one clear line, exit code 2, no traceback."""


def _prepare() -> Any:
    from pydantic import ValidationError

    from app.core.logging import setup_logging
    from app.ml.environment import apply_torch_environment

    try:
        settings = get_settings()
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise StartupError(f"invalid settings: {problems}") from exc
    setup_logging(settings.log_dir)
    apply_torch_environment(
        mps_fallback=settings.mps_fallback,
        mps_high_watermark_ratio=settings.mps_high_watermark_ratio,
        mps_low_watermark_ratio=settings.mps_low_watermark_ratio,
    )
    return settings


def _check_device(settings: Any) -> None:
    """QATUNE_DEVICE names a device this machine has: checked at start, not at the first job."""
    from app.ml.device import DeviceUnavailable, probe_capabilities, select_device

    try:
        select_device(probe_capabilities(), settings.device)
    except DeviceUnavailable as exc:
        raise StartupError(str(exc)) from exc


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    settings = _prepare()
    _check_device(settings)
    uvicorn.run(
        "app.main:app",
        host=args.host or settings.host,
        port=args.port or settings.port,
        log_config=None,  # loguru already intercepts uvicorn's loggers
    )
    return 0


def _worker(args: argparse.Namespace) -> int:
    import signal
    import threading

    from app.db.session import Database
    from app.worker.supervisor import Worker

    settings = _prepare()
    _check_device(settings)
    database = Database.from_settings(settings)
    database.migrate()
    worker = Worker(database, settings)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    worker.start()
    try:
        stop.wait()
    finally:
        worker.stop()
    return 0


def _create_user(args: argparse.Namespace) -> int:
    from app.core.errors import QatuneError
    from app.db.session import Database
    from app.schemas.users import UserCreate
    from app.services.users import create_user

    settings = _prepare()
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = getpass.getpass(f"Password for {args.username}: ")
    try:
        body = UserCreate(username=args.username, password=password, is_admin=args.admin)
    except ValueError as exc:
        print(f"qatune: {exc}", file=sys.stderr)
        return 2
    database = Database.from_settings(settings)
    database.migrate()
    try:
        with database.session() as session:
            user = create_user(
                session, username=body.username, password=body.password, is_admin=body.is_admin
            )
            print(f"created {'admin' if user.is_admin else 'user'} {user.username} (id {user.id})")
    except QatuneError as exc:
        print(f"qatune: {exc.message}", file=sys.stderr)
        return 1
    return 0


def _device(args: argparse.Namespace) -> int:
    from app.main import device_report
    from app.ml.device import DeviceUnavailable

    settings = _prepare()
    if args.benchmark:
        from app.ml.device_benchmark import run_benchmark

        run_benchmark(settings, model=args.model)
    try:
        report = device_report(settings)
    except DeviceUnavailable as exc:
        print(f"qatune: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print(f"device:    {report['device']}")
        print(f"precision: {report['precision']}")
        print(f"memory:    {report['memory_budget_gb']} GB budget")
        for reason in report["reasons"]:
            print(f"  - {reason}")
    return 0


def _train(args: argparse.Namespace) -> int:
    from app.core.errors import ValidationFailed
    from app.core.storage import Storage
    from app.services.qa_parsing import parse_qa_bytes

    settings = _prepare()
    try:
        parsed = parse_qa_bytes(args.data.read_bytes(), filename=args.data.name, max_rows=10**7)
    except (OSError, ValidationFailed) as exc:
        print(f"qatune: {args.data}: {getattr(exc, 'message', exc)}", file=sys.stderr)
        for detail in getattr(exc, "details", [])[:20]:
            print(f"  {detail}", file=sys.stderr)
        return 2
    from app.ml.model_trainer import ModelTrainer, TrainingFailed, TrainingRequest
    from app.ml.models import ModelUnavailable

    targets = args.lora_target_modules
    hyperparameters = {
        key: value
        for key, value in {
            "epochs": args.epochs,
            "max_steps": args.max_steps,
            # --batch-size is the effective batch; the memory plan picks the micro-batches.
            "effective_batch_size": args.batch_size,
            "learning_rate": args.learning_rate,
            "lora_r": args.lora_rank,
            "lora_alpha": args.lora_alpha,
            "lora_dropout": args.lora_dropout,
            "lora_target_modules": (
                targets.split(",") if targets and targets != "all-linear" else targets
            ),
            "max_seq_length": args.max_seq_length,
            "validation_split": args.validation_split,
            "precision": args.precision,
            "seed": args.seed,
        }.items()
        if value is not None
    }
    request = TrainingRequest(
        base_model=args.base_model or settings.default_base_model,
        pairs=parsed.pairs,
        output_dir=args.output,
        model_cache_dir=Storage(settings.data_dir).models_dir,
        hyperparameters=hyperparameters,
        device=settings.device,
        offline=settings.offline,
    )
    try:
        result = ModelTrainer(request).run()
    except (TrainingFailed, ModelUnavailable) as exc:
        print(f"qatune: {exc}", file=sys.stderr)
        return 1
    if args.metrics_json:
        args.metrics_json.write_text(json.dumps(result.metrics, indent=2))
    print(json.dumps(result.metrics, indent=2))
    return 0


def _ask(args: argparse.Namespace) -> int:
    from app.main import device_report, make_query_service
    from app.ml.models import ModelUnavailable
    from app.ml.query_service import AdapterInvalid, read_adapter_metadata

    settings = _prepare()
    try:
        base_model = read_adapter_metadata(args.adapter)["base_model"]
        answer = make_query_service(settings, device_report(settings)).answer(
            args.question,
            adapter_key="cli",
            adapter_dir=args.adapter,
            base_model=base_model,
            max_new_tokens=args.max_new_tokens,
            temperature=args.temperature,
        )
    except (AdapterInvalid, ModelUnavailable, OSError) as exc:
        print(f"qatune: {exc}", file=sys.stderr)
        return 1
    print(answer.answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
