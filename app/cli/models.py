"""Commands for models without the service: train, ask, export, export-base,
fetch-llama-cpp."""

import argparse
import json
import sys
from pathlib import Path

from app.cli.common import empty_or_new, problem, read_settings, start_runtime
from app.cli.options import add_hyperparameter_options, hyperparameters_given
from app.core.language import Sentence
from app.core.storage import Storage
from app.ml.export import DEFAULT_GGUF_TYPE, GGUF_TYPES


def add_commands(
    commands: "argparse._SubParsersAction[argparse.ArgumentParser]",
) -> None:
    """Each command's parser, with the function that runs it (`run`)."""
    train = commands.add_parser("train", help="train an adapter from a file, without the service")
    train.set_defaults(run=run_train)
    train.add_argument(
        "--base-model", default=None, help="default: QATUNE_DEFAULT_BASE_MODEL (builtin:tiny)"
    )
    train.add_argument("--data", type=Path, required=True, help="JSONL, JSON or CSV of QA pairs")
    train.add_argument("--output", type=Path, required=True, help="directory for the adapter")
    train.add_argument(
        "--start-from",
        type=Path,
        default=None,
        help="an adapter directory to train further (its base model and LoRA shape), e.g. "
        "SFT then DPO",
    )
    train.add_argument(
        "--keep-data",
        type=Path,
        default=None,
        help="with --start-from: the pairs that adapter was trained on, trained beside so the "
        "job keeps them, and counted at the end (the service keeps a job's own)",
    )
    train.add_argument(
        "--grader",
        type=Path,
        default=None,
        help="a JSON file of OpenAI's grader: train with reinforcement (GRPO), the grader "
        "scoring each sampled answer",
    )
    add_hyperparameter_options(train)
    train.add_argument("--metrics-json", type=Path, help="write the run's metrics here")

    export = commands.add_parser(
        "export-base", help="write the built-in model as a transformers directory"
    )
    export.set_defaults(run=run_export_base)
    export.add_argument("model", help="builtin:tiny")
    export.add_argument("directory", type=Path, help="an empty or new directory")

    merged = commands.add_parser(
        "export", help="write a trained adapter merged into its base (transformers or GGUF)"
    )
    merged.set_defaults(run=run_export)
    merged.add_argument("--adapter", type=Path, required=True, help="what `qatune train` wrote")
    merged.add_argument("--format", choices=["merged", "gguf"], default="merged")
    merged.add_argument("--outtype", choices=GGUF_TYPES, default=DEFAULT_GGUF_TYPE, help="gguf")
    merged.add_argument("directory", type=Path, help="an empty or new directory")

    fetch = commands.add_parser(
        "fetch-llama-cpp", help="download llama.cpp's GGUF converter (for --format gguf)"
    )
    fetch.set_defaults(run=run_fetch_llama_cpp)

    ask = commands.add_parser("ask", help="ask a trained adapter a question, without the service")
    ask.set_defaults(run=run_ask)
    ask.add_argument("--adapter", type=Path, required=True, help="directory `qatune train` wrote")
    ask.add_argument("question")
    ask.add_argument(
        "--max-new-tokens", type=int, help="default: room for the adapter's longest answers"
    )
    ask.add_argument("--temperature", type=float, default=0.0)
    ask.add_argument(
        "--verbose", action="store_true", help="show loading progress and where the time went"
    )


def run_train(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from app.core.errors import ValidationFailed
    from app.ml.hyperparameters import LORA_FIELDS, HyperparameterRequest
    from app.ml.pairs import QAPair
    from app.services.datasets.qa_parsing import parse_qa_bytes

    runtime = start_runtime()
    try:
        parsed = parse_qa_bytes(args.data.read_bytes(), filename=args.data.name, max_rows=10**7)
    except (OSError, ValidationFailed) as exc:
        print(f"qatune: {args.data}: {getattr(exc, 'message', exc)}", file=sys.stderr)
        for detail in getattr(exc, "details", [])[:20]:
            print(f"  {detail}", file=sys.stderr)
        return 2
    try:
        hyperparameters = HyperparameterRequest.model_validate(hyperparameters_given(args))
    except ValidationError as exc:
        print(f"qatune: {'; '.join(problem(e) for e in exc.errors())}", file=sys.stderr)
        return 2

    from app.ml.models import ModelUnavailable
    from app.ml.training.request import TrainingRequest
    from app.ml.training.stops import TrainingFailed
    from app.ml.training.trainer import ModelTrainer
    from app.services.evals.graders import sandbox_limits

    grader = None
    if args.grader is not None:
        from pydantic import TypeAdapter

        from app.graders.spec import Grader

        try:
            grader = TypeAdapter(Grader).validate_json(args.grader.read_bytes())
        except (OSError, ValidationError) as exc:
            print(f"qatune: --grader {args.grader}: {exc}", file=sys.stderr)
            return 2
    base_model = args.base_model or runtime.settings.default_base_model
    if Path(base_model).is_dir():  # at the command line a directory here is what is meant
        base_model = str(Path(base_model).resolve())
    if args.keep_data is not None and args.start_from is None:
        print("qatune: --keep-data keeps what --start-from's adapter learned: give both",
              file=sys.stderr)  # fmt: skip
        return 2
    keep: list[QAPair] = []
    if args.keep_data is not None:
        try:
            keep = parse_qa_bytes(
                args.keep_data.read_bytes(), filename=args.keep_data.name, max_rows=10**7
            ).pairs
        except (OSError, ValidationFailed) as exc:
            print(f"qatune: {args.keep_data}: {getattr(exc, 'message', exc)}", file=sys.stderr)
            return 2
    start = None
    if args.start_from is not None:
        from app.ml.training.adapter_metadata import AdapterInvalid, read_adapter_metadata
        from app.ml.training.request import StartAdapter

        try:
            trained = read_adapter_metadata(args.start_from)
        except (OSError, AdapterInvalid) as exc:
            print(f"qatune: --start-from {args.start_from}: {exc}", file=sys.stderr)
            return 2
        base_model = trained.base_model
        shape = {k: trained.hyperparameters[k] for k in LORA_FIELDS if k in trained.hyperparameters}
        hyperparameters = hyperparameters.model_copy(update=shape)
        start = StartAdapter(args.start_from.resolve(), str(args.start_from))
    request = TrainingRequest(
        base_model=base_model,
        pairs=parsed.pairs,
        output_dir=args.output,
        model_cache_dir=runtime.storage.models_dir,
        hyperparameters=hyperparameters,
        device_plan=runtime.device_plan,
        offline=runtime.settings.offline,
        cpu_threads=runtime.settings.training_threads or None,
        start=start,
        base_answers_dir=runtime.storage.base_answers_dir("cli"),
        grader=grader,
        keep_pairs=keep,
        python_graders=sandbox_limits(runtime.settings),
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


def run_ask(args: argparse.Namespace) -> int:
    import logging
    import time
    import warnings

    from transformers.utils import logging as transformers_logging

    from app.core.errors import QatuneError
    from app.ml.models import ModelUnavailable
    from app.ml.serving.requests import GenerationFailed
    from app.ml.serving.vllm_engine import VllmEngine
    from app.ml.training.adapter_metadata import AdapterInvalid
    from app.services.serving.queries import Options

    if not args.verbose:  # the answer alone on stdout, nothing on stderr but problems
        from loguru import logger

        logger.remove()
        logger.add(sys.stderr, level="WARNING")
        transformers_logging.disable_progress_bar()
        transformers_logging.set_verbosity_error()
        warnings.filterwarnings("ignore", category=FutureWarning)
        # bitsandbytes (which peft imports) warns at import that an optional CPU kernel
        # package is absent; its own kernels serve, so the answer stays alone
        logging.getLogger("bitsandbytes").setLevel(logging.ERROR)
    runtime = start_runtime(logs=args.verbose)
    started = time.perf_counter()
    try:
        served = runtime.serving.adapter_model(args.adapter)
        engine = runtime.query_service.engine(served.base_model, served.quantization)
        if isinstance(engine, VllmEngine):  # its servers start in the background: wait here
            if args.verbose:
                print(f"qatune: waiting for vLLM to serve {served.base_model}", file=sys.stderr)
            engine.wait_until_up()
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


def run_export_base(args: argparse.Namespace) -> int:
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
    if not empty_or_new(target):
        return 2
    cache = Storage(read_settings().data_dir).models_dir
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


def run_export(args: argparse.Namespace) -> int:
    """The adapter merged into its base (app/ml/export), progress on stderr."""
    from app.ml.builtin import is_builtin
    from app.ml.device_benchmark import plan_this_machine
    from app.ml.export.gguf import GgufUnsupported, export_gguf
    from app.ml.export.llama_cpp import ConverterMissing, default_converter_dir, require_converter
    from app.ml.export.merged import export_merged
    from app.ml.models import ModelUnavailable, resolve_model_dir
    from app.ml.training.adapter_metadata import AdapterInvalid, read_adapter_metadata

    target: Path = args.directory
    if not empty_or_new(target):
        return 2
    settings = read_settings()

    def progress(share: float, what: Sentence) -> None:
        print(f"{share:4.0%} {what.text()}", file=sys.stderr)

    try:
        base_model = read_adapter_metadata(args.adapter).base_model
        base_dir = resolve_model_dir(
            base_model,
            cache_dir=Storage(settings.data_dir).models_dir,
            offline=settings.offline,
            configured=tuple(settings.base_models),
            precision=plan_this_machine(settings.device, settings.data_dir).precision,
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


def run_fetch_llama_cpp(args: argparse.Namespace) -> int:
    from app.ml.export.llama_cpp import ConverterMissing, default_converter_dir, fetch_converter

    try:
        where = fetch_converter(read_settings().llama_cpp_dir or default_converter_dir())
    except ConverterMissing as exc:
        print(f"qatune: {exc}", file=sys.stderr)
        return 1
    print(f"llama.cpp's GGUF converter is in {where}")
    return 0
