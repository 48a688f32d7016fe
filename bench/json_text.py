"""What the lone-surrogate check costs a JSON body, beside the parse FastAPI does anyway.

    python -m bench.json_text --pairs 100000 --rounds 5

Four bodies of `--pairs` QA pairs (ASCII, Chinese, Korean, and emoji written as JSON's
escapes) are checked three ways, in one process, alternating: the walk of every string
(`lone_surrogate_at`), and the byte search that decides whether to walk at all
(`might_hold_a_surrogate`, then the walk only where it says yes: what a request pays).
Each is printed in ms, median of `--rounds`, with its ratio to `json.loads` of the body.
"""

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from app.core.json_text import lone_surrogate_at, might_hold_a_surrogate

QUESTIONS = {
    "ascii": ("What is question number {n} about our product?", "It is on page {n}."),
    "chinese": ("我们产品的第 {n} 个问题是什么？", "在手册第 {n} 页。"),
    "korean": ("우리 제품의 {n}번째 질문은 무엇입니까?", "설명서 {n}쪽에 있습니다."),
    "emoji": ("Which emoji is number {n}? 😀", "This one: 🎉"),
}


def body(kind: str, pairs: int) -> bytes:
    question, answer = QUESTIONS[kind]
    records = [
        {"question": question.format(n=n), "answer": answer.format(n=n)} for n in range(pairs)
    ]
    # ensure_ascii for the emoji body: each emoji travels as a pair of \\u escapes
    return json.dumps({"qa_pairs": records}, ensure_ascii=kind == "emoji").encode()


def median_ms(work: Callable[[], Any], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times)


def checked(raw: bytes, value: Any) -> None:
    if might_hold_a_surrogate(raw):
        assert lone_surrogate_at(value) is None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print("body      MB  json.loads ms  walk ms (x parse)  search+walk ms (x parse)  walked")
    for kind in QUESTIONS:
        raw = body(kind, args.pairs)
        value = json.loads(raw)
        parse = median_ms(lambda: json.loads(raw), args.rounds)  # noqa: B023
        walk = median_ms(lambda: lone_surrogate_at(value), args.rounds)  # noqa: B023
        shipped = median_ms(lambda: checked(raw, value), args.rounds)  # noqa: B023
        print(
            f"{kind:8} {len(raw) / 1e6:4.1f} {parse:13.1f} {walk:9.1f} ({walk / parse:4.2f}x)"
            f" {shipped:15.1f} ({shipped / parse:4.2f}x)   {might_hold_a_surrogate(raw)}"
        )


if __name__ == "__main__":
    main()
