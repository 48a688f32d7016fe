"""`qatune`: serve, worker, train, ask, device, create-user.

Every command builds the same `Runtime` the service does (settings, torch environment,
device plan, database when it needs one); settings or hardware that cannot work stop it
with one line on stderr and exit code 2.
"""

import argparse
import getpass
import json
import sys
from pathlib import Path
from typing import Any

from app.core.config import Settings, get_settings
from app.core.storage import Storage
from app.ml.export import DEFAULT_GGUF_TYPE, GGUF_TYPES
from app.runtime import Runtime


class StartupError(Exception):
    """Settings or hardware that cannot work: one clear line, exit code 2, no traceback."""


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    handler = {
        "serve": _serve,
        "worker": _worker,
        "create-user": _create_user,
        "device": _device,
        "train": _train,
        "ask": _ask,
        "export-base": _export_base,
        "export": _export,
        "fetch-llama-cpp": _fetch_llama_cpp,
    }[args.command]
    try:
        return handler(args)
    except StartupError as exc:
        print(f"qatune: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _parser() -> argparse.ArgumentParser:
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
    # The API's hyperparameter names, spelled as options (auto when left out).
    train.add_argument("--epochs", type=int)
    train.add_argument("--max-steps", type=int)
    train.add_argument("--max-minutes", type=float, help="training time limit")
    train.add_argument("--batch-size", type=int, help="examples per optimizer step")
    train.add_argument("--micro-batch-size", type=int, help="examples per forward pass")
    train.add_argument("--learning-rate", type=float)
    train.add_argument("--lora-r", "--lora-rank", dest="lora_r", type=int)
    train.add_argument("--lora-alpha", type=int)
    train.add_argument("--lora-dropout", type=float, help="dropout on the LoRA input (auto: 0)")
    train.add_argument("--lora-target-modules", default=None, help="all-linear or a,b,c")
    train.add_argument("--max-seq-length", type=int)
    train.add_argument(
        "--validation-split", type=float, help="share held out for evaluation (auto: 0.1 from 100)"
    )
    train.add_argument("--precision", choices=["auto", "bf16", "fp16", "fp32"])
    train.add_argument("--gradient-checkpointing", choices=["auto", "true", "false"])
    train.add_argument("--seed", type=int)
    train.add_argument(
        "--processes", type=int, help="data-parallel processes (auto: one per CUDA GPU, else 1)"
    )
    train.add_argument("--metrics-json", type=Path, help="write the run's metrics here")

    export = commands.add_parser(
        "export-base", help="write the built-in model as a transformers directory"
    )
    export.add_argument("model", help="builtin:tiny")
    export.add_argument("directory", type=Path, help="an empty or new directory")

    merged = commands.add_parser(
        "export", help="write a trained adapter merged into its base (transformers or GGUF)"
    )
    merged.add_argument("--adapter", type=Path, required=True, help="what `qatune train` wrote")
    merged.add_argument("--format", choices=["merged", "gguf"], default="merged")
    merged.add_argument("--outtype", choices=GGUF_TYPES, default=DEFAULT_GGUF_TYPE, help="gguf")
    merged.add_argument("directory", type=Path, help="an empty or new directory")

    commands.add_parser(
        "fetch-llama-cpp", help="download llama.cpp's GGUF converter (for --format gguf)"
    )

    ask = commands.add_parser("ask", help="ask a trained adapter a question, without the service")
    ask.add_argument("--adapter", type=Path, required=True, help="directory `qatune train` wrote")
    ask.add_argument("question")
    ask.add_argument(
        "--max-new-tokens", type=int, help="default: room for the adapter's longest answers"
    )
    ask.add_argument("--temperature", type=float, default=0.0)
    ask.add_argument(
        "--verbose", action="store_true", help="show loading progress and where the time went"
    )
    return parser


def _settings() -> Settings:
    from pydantic import ValidationError

    try:
        return get_settings()
    except ValidationError as exc:
        problems = "; ".join(_setting_problem(error) for error in exc.errors())
        raise StartupError(f"invalid settings: {problems}") from exc


def _setting_problem(error: Any) -> str:
    where = ".".join(map(str, error["loc"]))
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def _runtime(*, logs: bool = True) -> Runtime:
    """The process's runtime, with its device decided now: a bad QATUNE_DEVICE stops here."""
    from app.core.logging import setup_logging
    from app.ml.device import DeviceUnavailable

    settings = _settings()
    if logs:
        setup_logging(settings.log_dir)
    runtime = Runtime(settings)
    try:
        runtime.device_plan  # noqa: B018  (decided at start, not at the first job)
    except DeviceUnavailable as exc:
        raise StartupError(str(exc)) from exc
    return runtime


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    settings = _runtime().settings
    uvicorn.run(
        "app.main:create_app",
        factory=True,
        host=args.host or settings.host,
        port=args.port or settings.port,
        log_config=None,  # loguru already intercepts uvicorn's loggers
    )
    return 0


def _worker(args: argparse.Namespace) -> int:
    import signal
    import threading

    runtime = _runtime()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    runtime.start_worker()
    try:
        stop.wait()
    finally:
        runtime.close()
    return 0


def _create_user(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from app.core.errors import QatuneError
    from app.schemas.users import UserCreate
    from app.services.users import create_user

    runtime = Runtime(_settings())
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = getpass.getpass(f"Password for {args.username}: ")
    try:
        body = UserCreate(username=args.username, password=password, is_admin=args.admin)
    except ValidationError as exc:
        print(f"qatune: {'; '.join(_setting_problem(e) for e in exc.errors())}", file=sys.stderr)
        return 2
    try:
        with runtime.database.session() as session:
            user = create_user(
                session, username=body.username, password=body.password, is_admin=body.is_admin
            )
            print(f"created {'admin' if user.is_admin else 'user'} {user.username} (id {user.id})")
    except QatuneError as exc:
        print(f"qatune: {exc.message}", file=sys.stderr)
        return 1
    finally:
        runtime.close()
    return 0


def _device(args: argparse.Namespace) -> int:
    from app.schemas.system import DeviceReport

    runtime = _runtime()
    if args.benchmark:
        from app.ml.device_benchmark import run_benchmark

        run_benchmark(
            runtime.settings.data_dir,
            caps=runtime.device_plan.capabilities,
            model=args.model,
            model_cache_dir=runtime.storage.models_dir,
            offline=runtime.settings.offline,
        )
        runtime = _runtime(logs=False)  # a new plan: the benchmark's winner counts now
    report = DeviceReport.of(runtime.device_plan)
    if args.json:
        print(report.model_dump_json(indent=2))
    else:
        print(f"device:    {report.device}")
        print(f"precision: {report.precision}")
        print(f"memory:    {report.memory_budget_gb} GB budget")
        for reason in report.reasons:
            print(f"  - {reason}")
    return 0


def _train(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from app.core.errors import ValidationFailed
    from app.ml.hyperparameters import HyperparameterRequest
    from app.services.qa_parsing import parse_qa_bytes

    runtime = _runtime()
    try:
        parsed = parse_qa_bytes(args.data.read_bytes(), filename=args.data.name, max_rows=10**7)
    except (OSError, ValidationFailed) as exc:
        print(f"qatune: {args.data}: {getattr(exc, 'message', exc)}", file=sys.stderr)
        for detail in getattr(exc, "details", [])[:20]:
            print(f"  {detail}", file=sys.stderr)
        return 2
    targets = args.lora_target_modules
    given = {
        "epochs": args.epochs,
        "max_steps": args.max_steps,
        "max_minutes": args.max_minutes,
        "batch_size": args.batch_size,
        "micro_batch_size": args.micro_batch_size,
        "learning_rate": args.learning_rate,
        "lora_r": args.lora_r,
        "lora_alpha": args.lora_alpha,
        "lora_dropout": args.lora_dropout,
        "lora_target_modules": (
            targets.split(",") if targets and targets != "all-linear" else targets
        ),
        "max_seq_length": args.max_seq_length,
        "validation_split": args.validation_split,
        "precision": args.precision,
        "gradient_checkpointing": args.gradient_checkpointing,
        "seed": args.seed,
        "processes": args.processes,
    }
    try:
        hyperparameters = HyperparameterRequest.model_validate(
            {key: value for key, value in given.items() if value is not None}
        )
    except ValidationError as exc:
        print(f"qatune: {'; '.join(_setting_problem(e) for e in exc.errors())}", file=sys.stderr)
        return 2

    from app.ml.models import ModelUnavailable
    from app.ml.training.request import TrainingRequest
    from app.ml.training.stops import TrainingFailed
    from app.ml.training.trainer import ModelTrainer

    base_model = args.base_model or runtime.settings.default_base_model
    if Path(base_model).is_dir():  # at the command line a directory here is what is meant
        base_model = str(Path(base_model).resolve())
    request = TrainingRequest(
        base_model=base_model,
        pairs=parsed.pairs,
        output_dir=args.output,
        model_cache_dir=runtime.storage.models_dir,
        hyperparameters=hyperparameters,
        device_plan=runtime.device_plan,
        offline=runtime.settings.offline,
        cpu_threads=runtime.settings.training_threads or None,
    )
    try:
        result = ModelTrainer(request).run()
    except (TrainingFailed, ModelUnavailable) as exc:
        print(f"qatune: {exc}", file=sys.stderr)
        return 1
    metrics = json.dumps(result.metrics.as_dict(), indent=2)
    if args.metrics_json:
        args.metrics_json.write_text(metrics)
    print(metrics)
    return 0


def _export_base(args: argparse.Namespace) -> int:
    """The built-in model as plain files, for an adapter's own peft code (model_card.py)."""
    import shutil

    from app.ml.builtin import PORTABLE_NAME, builtin_dir, ensure_builtin_model, is_builtin

    if not is_builtin(args.model):
        print(
            f"qatune: {args.model} is not a built-in model: load a hub model by its id",
            file=sys.stderr,
        )
        return 2
    target: Path = args.directory
    if not _empty_or_new(target):
        return 2
    cache = Storage(_settings().data_dir).models_dir
    try:
        builtin_dir(cache, args.model)  # an unknown built-in name is refused here
    except ValueError as exc:
        print(f"qatune: {exc}", file=sys.stderr)
        return 2
    source = ensure_builtin_model(cache)
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.iterdir()):
        if path.is_file():
            shutil.copyfile(path, target / path.name)
            (target / path.name).chmod(0o644)
    print(f"{args.model} written to {target} (adapters name it {PORTABLE_NAME})")
    return 0


def _empty_or_new(target: Path) -> bool:
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        print(f"qatune: {target} exists and is not an empty directory", file=sys.stderr)
        return False
    return True


def _export(args: argparse.Namespace) -> int:
    """The adapter merged into its base (app/ml/export), progress on stderr."""
    from app.ml.builtin import is_builtin
    from app.ml.export.gguf import GgufUnsupported, export_gguf
    from app.ml.export.llama_cpp import ConverterMissing, default_converter_dir, require_converter
    from app.ml.export.merged import export_merged
    from app.ml.models import ModelUnavailable, resolve_model_dir
    from app.ml.training.adapter_files import AdapterInvalid, read_adapter_metadata

    target: Path = args.directory
    if not _empty_or_new(target):
        return 2
    settings = _settings()

    def progress(share: float, what: str) -> None:
        print(f"{share:4.0%} {what}", file=sys.stderr)

    try:
        base_model = read_adapter_metadata(args.adapter).base_model
        base_dir = resolve_model_dir(
            base_model,
            cache_dir=Storage(settings.data_dir).models_dir,
            offline=settings.offline,
            configured=tuple(settings.base_models),
        )
        target.mkdir(parents=True, exist_ok=True)
        if args.format == "merged":
            export_merged(base_dir, args.adapter, target, folder=target.name, progress=progress)
        else:
            export_gguf(
                base_dir,
                args.adapter,
                target,
                outtype=args.outtype,
                converter=require_converter(settings.llama_cpp_dir or default_converter_dir()),
                with_base=is_builtin(base_model),
                progress=progress,
            )
        for path in target.iterdir():
            path.chmod(0o644)  # the user's own folder: readable, whatever wrote it
    except (AdapterInvalid, ModelUnavailable, ConverterMissing, GgufUnsupported, OSError) as exc:
        print(f"qatune: {exc}", file=sys.stderr)
        return 1
    print(f"{base_model} with {args.adapter} merged in, written to {target}")
    return 0


def _fetch_llama_cpp(args: argparse.Namespace) -> int:
    from app.ml.export.llama_cpp import ConverterMissing, default_converter_dir, fetch_converter

    try:
        where = fetch_converter(_settings().llama_cpp_dir or default_converter_dir())
    except ConverterMissing as exc:
        print(f"qatune: {exc}", file=sys.stderr)
        return 1
    print(f"llama.cpp's GGUF converter is in {where}")
    return 0


def _ask(args: argparse.Namespace) -> int:
    import time
    import warnings

    from transformers.utils import logging as transformers_logging

    from app.core.errors import QatuneError
    from app.ml.models import ModelUnavailable
    from app.ml.serving.requests import GenerationFailed
    from app.ml.training.adapter_files import AdapterInvalid
    from app.services.serving import Options

    if not args.verbose:  # the answer alone on stdout, nothing on stderr but problems
        from loguru import logger

        logger.remove()
        logger.add(sys.stderr, level="WARNING")
        transformers_logging.disable_progress_bar()
        transformers_logging.set_verbosity_error()
        warnings.filterwarnings("ignore", category=FutureWarning)
    runtime = _runtime(logs=args.verbose)
    started = time.perf_counter()
    try:
        served = runtime.serving.adapter_model(args.adapter)
        engine = runtime.query_service.engine(served.base_model)
        loaded = time.perf_counter()
        options = Options(max_tokens=args.max_new_tokens, temperature=args.temperature)
        answer = runtime.serving.answer(served, args.question, options)
    except (AdapterInvalid, ModelUnavailable, GenerationFailed, QatuneError, OSError) as exc:
        print(f"qatune: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return 1
    finally:
        runtime.close()
    print(answer.text)
    if args.verbose:
        print(
            f"qatune: {served.base_model} loaded on {engine.device} in {loaded - started:.1f} s; "
            f"adapter loaded and answer generated in {answer.seconds:.1f} s "
            f"(finish: {answer.finish_reason})",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
