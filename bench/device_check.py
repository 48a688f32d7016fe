"""The whole training and serving path on the best device here (CUDA > MPS > CPU), as the
worker and the query service run it: a default ("auto") job on a generated FAQ, then
every training question asked through the serving engine.

    python -m bench.device_check [--pairs 30] [--length long] [--language mixed]
        [--base smollm2-135m-instruct]

Prints the device, the precision and why, the memory plan against the peak, the speed,
what the job says it learned and what the engine answers. Run on a GPU machine for
docs/devices.md; it needs only app.ml's dependencies (torch, transformers, peft,
pydantic, loguru, psutil), not the web service's.
"""

import argparse
import queue
import tempfile
import time
from pathlib import Path

from bench.faq_data import Language, Length, faq


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--length", choices=["short", "medium", "long"], default="long")
    parser.add_argument("--language", choices=["en", "zh", "mixed"], default="mixed")
    parser.add_argument(
        "--base", default="builtin:tiny", help="the base model: builtin:tiny, or the real one"
    )
    args = parser.parse_args()
    length: Length = args.length
    language: Language = args.language

    import torch

    from app.ml.data import prompt_ids
    from app.ml.device import plan_device, probe_capabilities
    from app.ml.hyperparameters import HyperparameterRequest
    from app.ml.pairs import QAPair
    from app.ml.query_service import QueryService
    from app.ml.serving.requests import (
        AdapterRef,
        EngineEvent,
        GenerationRequest,
        Sampling,
        TextDelta,
    )
    from app.ml.training.adapter_files import read_evaluation
    from app.ml.training.adapter_metadata import answer_budget, read_adapter_metadata
    from app.ml.training.request import TrainingRequest
    from app.ml.training.trainer import ModelTrainer

    plan = plan_device(probe_capabilities())
    print(f"device {plan.device} ({'; '.join(r.english() for r in plan.device_reasons)})")
    print(f"precision {plan.precision} ({plan.precision_reason})")
    pairs = [QAPair(p["question"], p["answer"]) for p in faq(args.pairs, length, language)]
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "models"
        request = TrainingRequest(
            base_model=args.base,
            pairs=pairs,
            output_dir=Path(tmp) / "adapter",
            model_cache_dir=cache,
            hyperparameters=HyperparameterRequest(),
            device_plan=plan,
            offline=True,
        )
        if plan.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        started = time.perf_counter()
        result = ModelTrainer(request).run()
        wall = time.perf_counter() - started
        m = result.metrics
        print(
            f"trained {m.epochs:g} epochs ({m.train_steps} steps) in {m.train_runtime_s:.1f} s "
            f"({wall:.1f} s with loading, evaluation and saving), {m.tokens_per_second:,.0f} "
            f"real tokens/s, final loss {m.final_loss}, dtype {m.dtype}"
        )
        print(f"the job says it learned {m.train_exact_match:.1%} of {len(pairs)} answers")
        if plan.device == "cuda":
            peak = torch.cuda.max_memory_allocated() / 2**30
            print(f"CUDA peak allocated {peak:.3f} GiB (plan in the log above)")
        report = read_evaluation(result.adapter_dir)
        assert report is not None
        print(
            f"evaluation table: {report.split}, {report.exact_match:.1%} exact, base "
            f"{report.base_exact_match:.1%}"
        )

        engine = QueryService(device_plan=plan, model_cache_dir=cache, offline=True).engine(
            args.base
        )
        adapter = AdapterRef("job", result.adapter_dir)
        budget = answer_budget(read_adapter_metadata(adapter.directory))
        started = time.perf_counter()
        right = 0
        for pair in pairs:  # one at a time, greedy, as the service's query route asks
            events: queue.Queue[EngineEvent] = queue.Queue()
            ids = prompt_ids(engine.tokenizer, pair.prompt_messages())
            deadline = time.monotonic() + 300
            engine.submit(GenerationRequest(ids, adapter, Sampling(budget), events.put, deadline))
            text = []
            while isinstance(event := events.get(), TextDelta):
                text.append(event.text)
            right += "".join(text).strip() == pair.answer
        seconds = time.perf_counter() - started
        print(
            f"serving engine on {plan.device}: {right}/{len(pairs)} exact, "
            f"{seconds / len(pairs):.2f} s an answer (one at a time)"
        )


if __name__ == "__main__":
    main()
