"""Every loss and decision of six short runs, to check that a change leaves the numerics as
they were, to the last digit.

    python -m bench.loss_fingerprint --write before.json     # on the commit before
    python -m bench.loss_fingerprint --against before.json   # on the change

Six `ModelTrainer` runs on the built-in model, one thread each (a thread count changes
the sums' order): supervised with auto epochs and a validation split, auto epochs without
one (the best epoch kept), fixed epochs with question noise, a short supervised run, DPO
and reinforcement each training that run further. Each run's every step loss (`repr`,
all digits), its learned, validation, kept and knowledge lines, and its metrics (times
left out) are written as JSON; `--against` says which differ, and exits 1 if any do.
About a minute on 2 cores.
"""

import argparse
import json
import re
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

RUNS = ("sft_auto_val", "sft_auto", "sft_fixed_noise", "sft_for_dpo", "dpo_further", "rft_further")


def fingerprint() -> dict[str, Any]:
    import torch

    from app.graders.spec import StringCheck
    from app.ml.builtin import ensure_builtin_model
    from app.ml.hyperparameters import HyperparameterRequest
    from app.ml.training import trainer as trainer_module
    from app.ml.training.request import StartAdapter, TrainingRequest
    from app.ml.training.trainer import ModelTrainer, TrainingResult
    from tests.conftest import cpu_plan, training_pairs

    torch.set_num_threads(1)
    pairs = training_pairs()
    losses: list[list[str]] = []
    run_metrics = trainer_module.run_metrics

    def kept_losses(done: Any, *args: Any, **kwargs: Any) -> Any:
        losses.append([repr(loss) for loss in done.losses])
        return run_metrics(done, *args, **kwargs)

    trainer_module.run_metrics = kept_losses
    tmp = Path(tempfile.mkdtemp(prefix="qatune-fingerprint-"))
    cache = tmp / "models"
    cache.mkdir()
    ensure_builtin_model(cache)
    found: dict[str, Any] = {}

    def run(name: str, data: list[Any], **asked: Any) -> TrainingResult:
        extra = {key: asked.pop(key) for key in ("start", "grader") if key in asked}
        request = TrainingRequest(
            base_model="builtin:tiny",
            pairs=data,
            output_dir=tmp / name,
            model_cache_dir=cache,
            hyperparameters=HyperparameterRequest.model_validate(asked),
            device_plan=cpu_plan(),
            offline=True,
            cpu_threads=1,
            **extra,
        )
        events: list[Any] = []
        result = ModelTrainer(request, on_event=events.append).run()
        kinds = ("learned", "validated", "note", "knowledge_kept")
        found[name] = {
            "losses": losses[-1],
            "lines": [
                re.sub(r" in [0-9.]+ s\)?", "", event.message.english())
                for event in events
                if event.data is not None and event.data.kind in kinds
            ],
            "metrics": {
                key: value
                for key, value in result.metrics.as_dict().items()
                if not any(part in key for part in ("second", "runtime", "memory", "peak"))
            },
        }
        return result

    run("sft_auto_val", pairs[:24], validation_split=0.25, seed=3)
    run("sft_auto", pairs[:12], seed=5)
    run("sft_fixed_noise", pairs[:12], epochs=6, question_noise=0.3, seed=1)
    first = run("sft_for_dpo", pairs[:12], max_steps=20, seed=2)
    start = StartAdapter(first.adapter_dir, "sft")
    preferences = [replace(p, rejected=pairs[(i + 1) % 12].answer) for i, p in enumerate(pairs)]
    run("dpo_further", preferences[:4], start=start, seed=2)
    exact = StringCheck(
        type="string_check",
        name="exact",
        input="{{sample.output_text}}",
        reference="{{item.answer}}",
        operation="eq",
    )
    run("rft_further", pairs[:12], start=start, grader=exact, epochs=2, group_size=4, seed=2)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="write the fingerprint here")
    parser.add_argument("--against", type=Path, help="compare with a fingerprint written before")
    args = parser.parse_args()
    found = json.loads(json.dumps(fingerprint(), default=str))
    if args.write:
        args.write.write_text(json.dumps(found, indent=1))
    for name in RUNS:
        print(f"{name}: {len(found[name]['losses'])} steps, final loss {found[name]['losses'][-1]}")
    if args.against is None:
        return 0
    before = json.loads(args.against.read_text())
    differ = [
        f"{name} {part}"
        for name in RUNS
        for part in ("losses", "lines", "metrics")
        if before[name][part] != found[name][part]
    ]
    print("the same to the last digit" if not differ else "differ: " + ", ".join(differ))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
