"""A GGUF export's three conversions (the merged model, the adapter as a GGUF LoRA, the base)
in one converter process, side by side with one process for each, as they ran before.

    python -m bench.gguf_export --rounds 4

The built-in model and a rank-16 LoRA adapter on all its linear layers, f16. Both ways run
the same scripts with the same arguments through `run_conversions`; the baseline calls it
once per conversion. The two alternate, each first in every other round. Reported: the CPU
seconds of each (the converter processes' user + system) and the wall time, medians, the
ratios baseline / one process (higher is better), and whether the files are byte for byte
the same.
"""

import argparse
import hashlib
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.results import record

ROOT = Path(__file__).resolve().parent.parent


def make_adapter(base: Path, target: Path) -> None:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base)
    config = LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM")
    get_peft_model(model, config).save_pretrained(str(target))


def measured(run: Callable[[], None]) -> tuple[float, float]:
    """CPU seconds of the child processes `run` waits for, and its wall seconds."""
    before, started = os.times(), time.perf_counter()
    run()
    after = os.times()
    cpu = after.children_user - before.children_user
    return cpu + after.children_system - before.children_system, time.perf_counter() - started


def digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def main() -> None:
    from app.ml.builtin import builtin_dir, ensure_builtin_model
    from app.ml.export.llama_cpp import (
        Conversion,
        default_converter_dir,
        require_converter,
        run_conversions,
    )

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    converter = require_converter(default_converter_dir())
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch)
        ensure_builtin_model(home / "models")
        base, adapter = builtin_dir(home / "models"), home / "adapter"
        make_adapter(base, adapter)

        def conversions(out: Path) -> list[Conversion]:
            def gguf(script: str, *inputs: str, name: str) -> Conversion:
                outfile = str(out / f"{name}-f16.gguf")
                return Conversion(script, (*inputs, "--outfile", outfile, "--outtype", "f16"))

            out.mkdir(exist_ok=True)
            return [
                gguf("convert_hf_to_gguf.py", str(base), name="model"),
                gguf("convert_lora_to_gguf.py", str(adapter), "--base", str(base), name="adapter"),
                gguf("convert_hf_to_gguf.py", str(base), name="base"),
            ]

        def one_process() -> None:
            run_conversions(converter, conversions(home / "one"), timeout=600)

        def one_each() -> None:
            for conversion in conversions(home / "each"):
                run_conversions(converter, [conversion], timeout=600)

        each: list[tuple[float, float]] = []
        one: list[tuple[float, float]] = []
        for round_ in range(args.rounds):  # ABBA: whichever runs second may pay more
            if round_ % 2:
                one.append(measured(one_process))
            each.append(measured(one_each))
            if not round_ % 2:
                one.append(measured(one_process))
        same = digests(home / "one") == digests(home / "each")

    def median(runs: list[tuple[float, float]], index: int) -> float:
        return statistics.median(run[index] for run in runs)

    cpu_ratio, wall_ratio = median(each, 0) / median(one, 0), median(each, 1) / median(one, 1)
    for name, runs in (("one process each", each), ("one process", one)):
        print(f"{name:>16}: CPU s {' '.join(f'{c:.2f}' for c, _ in runs)}; "
              f"wall s {' '.join(f'{w:.2f}' for _, w in runs)}")  # fmt: skip
    print(
        f"medians: CPU {median(each, 0):.2f} -> {median(one, 0):.2f} s ({cpu_ratio:.2f}x), "
        f"wall {median(each, 1):.2f} -> {median(one, 1):.2f} s ({wall_ratio:.2f}x); "
        f"files {'the same' if same else 'DIFFER'}"
    )
    command = f"python -m bench.gguf_export --rounds {args.rounds}"
    path = record(
        "gguf_export",
        {"conversions cpu": cpu_ratio, "conversions wall": wall_ratio, "same files": float(same)},
        command,
    )
    print("recorded", path.relative_to(ROOT))


if __name__ == "__main__":
    main()
