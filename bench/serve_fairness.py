"""One user's burst beside another user's one question, on the real model: how long the
one question waits, first come first served against a turn per user.

    python -m bench.serve_fairness [--burst 128] [--tokens 64] [--rounds 2]

SmolLM2-135M-Instruct on the service's own engine (this machine's device plan, the
service's default batch). Alice submits `--burst` questions at once (general questions,
greedy, each answer to its end or `--tokens` new tokens); right after, Bob submits one.
Side by side, alternating, in one process: Bob asking as Alice's caller (one line, first
come first served: what the engine did before), and as a caller of his own (a turn per
user, app/ml/serving/waiting.py). Printed: the medians of Bob's wait to his answer's end
and of Alice's whole burst.
"""

import argparse
import json
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from bench.quality_real import DATA, MODEL

ALICE, BOB = 1, 2


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--burst", type=int, default=128)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--model-cache", type=Path, default=Path.home() / ".cache" / "qatune" / "bench-models"
    )
    args = parser.parse_args()
    args.model_cache.mkdir(parents=True, exist_ok=True)
    engine = real_model_engine(args.model_cache)
    general = json.loads((DATA / "general.json").read_text())["questions"]
    burst = [general[n % len(general)]["question"] for n in range(args.burst)]
    round_of = Rounds(engine, burst, args.tokens)
    round_of(BOB)  # warm-up: the first steps' allocations
    results: dict[str, list[tuple[float, float]]] = {"one line": [], "a turn per user": []}
    for _ in range(args.rounds):
        results["one line"].append(round_of(ALICE))
        results["a turn per user"].append(round_of(BOB))
    engine.close()
    print(
        f"\n{args.burst} of Alice's questions at once, then one of Bob's; {args.tokens} new "
        f"tokens each; medians of {args.rounds} rounds\n\n"
        "| line | Bob's answer, s | Alice's burst, s | Bob's wait / one line's |\n"
        "|---|---:|---:|---:|"
    )
    base = statistics.median(bob for bob, _ in results["one line"])
    for name, runs in results.items():
        bob = statistics.median(bob for bob, _ in runs)
        alice = statistics.median(whole for _, whole in runs)
        print(f"| {name} | {bob:.2f} | {alice:.1f} | {bob / base:.2f}x |")


def real_model_engine(model_cache: Path) -> Any:
    from app.ml.device import plan_device, probe_capabilities
    from app.ml.query_service import QueryService
    from app.ml.serving.requests import EngineLimits

    service = QueryService(
        device_plan=plan_device(probe_capabilities(), "auto", None),
        model_cache_dir=model_cache,
        offline=True,
        limits=EngineLimits(max_waiting=10_000),  # the whole burst waits, none is refused
    )
    return service.engine(MODEL)


class Rounds:
    def __init__(self, engine: Any, burst: list[str], tokens: int) -> None:
        from app.ml.serving.asking import Row, chat_ids
        from app.ml.serving.requests import Sampling

        sampling = Sampling(max_tokens=tokens)
        self.engine = engine
        self.rows = lambda texts: [
            Row(chat_ids(engine.tokenizer, [{"role": "user", "content": t}]), None, sampling)
            for t in texts
        ]
        self.burst = burst

    def __call__(self, bob_as: int) -> tuple[float, float]:
        """Bob's wait and Alice's whole burst, in seconds, Bob asking as caller `bob_as`."""
        from app.ml.serving.asking import ask

        started = time.monotonic()
        hers = ask(self.engine, self.rows(self.burst), seconds=3600, caller=ALICE)
        his_start = time.monotonic()
        his = ask(self.engine, self.rows(["Who wrote Hamlet?"]), seconds=3600, caller=bob_as)
        waited: list[float] = []

        def wait_for_his() -> None:
            his.answer()
            waited.append(time.monotonic() - his_start)

        thread = threading.Thread(target=wait_for_his)
        thread.start()
        hers.answer()
        whole = time.monotonic() - started
        thread.join()
        return waited[0], whole


if __name__ == "__main__":
    main()
