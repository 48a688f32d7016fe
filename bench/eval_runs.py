"""An eval run batched through the serving engine, against the same run one item at a time.

    python -m bench.eval_runs [--items 48] [--tokens 32]

One real service (`qatune serve`, SQLite) on the built-in model, twice: with the engine's
batch at 1 (each item sampled and graded after the one before: the baseline) and at its
default of 8 (`QATUNE_SERVE_MAX_BATCH`: a batch of items decoded together, each answer's
criteria graded at once). Each time, through the official client, an eval with a string
check and a ROUGE-L criterion, and a `completions` run of `builtin:tiny` (greedy, at most
`--tokens` tokens an answer) over `--items` FAQ questions, timed from the run's creation
to `completed`. The seconds, items/s and their ratio are reported, and how many of the
two runs' answers are the same (in bf16 a batch can flip the random model's near-ties).
Client and server share this machine's cores.
"""

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.results import record
from tests.conftest import login_over_http, qa_pairs, start_server

CRITERIA: Any = [
    {"type": "string_check", "name": "exact", "operation": "eq",
     "input": "{{ sample.output_text }}", "reference": "{{ item.answer }}"},
    {"type": "text_similarity", "name": "close", "evaluation_metric": "rouge_l",
     "pass_threshold": 0.6, "input": "{{ sample.output_text }}", "reference": "{{ item.answer }}"},
]  # fmt: skip


def timed_run(
    model_cache: Path, root: Path, batch: int, items: int, tokens: int
) -> tuple[float, list[str]]:
    from openai import OpenAI

    server = start_server(root / f"data-{batch}", model_cache, QATUNE_SERVE_MAX_BATCH=str(batch))
    try:
        token = login_over_http(server)["Authorization"][7:]
        client = OpenAI(base_url=f"{server.url}/v1", api_key=token, max_retries=0)
        pairs = qa_pairs()
        rows: Any = [{"item": pairs[i % len(pairs)]} for i in range(items)]
        evaluation = client.evals.create(
            name="bench",
            data_source_config={"type": "custom", "item_schema": {"type": "object"}},
            testing_criteria=CRITERIA,
        )
        template = [{"role": "user", "content": "{{ item.question }}"}]
        warm: Any = {
            "type": "completions",
            "model": "builtin:tiny",
            "input_messages": {"type": "template", "template": template},
            "sampling_params": {"temperature": 0, "max_completion_tokens": tokens},
            "source": {"type": "file_content", "content": rows[:1]},
        }
        source: Any = dict(warm, source={"type": "file_content", "content": rows})
        for data_source in (warm, source):  # the first loads the model, untimed
            started = time.perf_counter()
            made = client.evals.runs.create(evaluation.id, data_source=data_source)
            while (run := client.evals.runs.retrieve(made.id, eval_id=evaluation.id)).status in (
                "queued",
                "in_progress",
            ):
                time.sleep(0.05)
            seconds = time.perf_counter() - started
            assert run.status == "completed", run
        answers = [
            item.sample.output[0].content or ""
            for item in client.evals.runs.output_items.list(
                run.id, eval_id=evaluation.id, limit=100
            )
        ]
        return seconds, answers
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=48)
    parser.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args()
    from app.ml.builtin import ensure_builtin_model

    with tempfile.TemporaryDirectory() as tmp:
        model_cache = Path(tmp) / "models"
        ensure_builtin_model(model_cache)
        alone, alone_answers = timed_run(model_cache, Path(tmp), 1, args.items, args.tokens)
        batched, answers = timed_run(model_cache, Path(tmp), 8, args.items, args.tokens)
    # In bf16 a batch sums in another order than one row alone, which can flip the random
    # model's near-ties: how many answers are the same is reported, not assumed.
    same = sum((Counter(answers) & Counter(alone_answers)).values())
    ratio = alone / batched
    print(
        f"{args.items} items, at most {args.tokens} tokens each, builtin:tiny, greedy, 2 criteria; "
        f"{same} of {args.items} answers the same both ways\n"
        f"| way | seconds | items/s |\n| --- | ---: | ---: |\n"
        f"| one at a time (batch 1) | {alone:.2f} | {args.items / alone:.1f} |\n"
        f"| batched (batch 8) | {batched:.2f} | {args.items / batched:.1f} |\n"
        f"ratio {ratio:.2f}x"
    )
    command = "python -m bench.eval_runs " + " ".join(sys.argv[1:])
    path = record("eval_runs", {"batched / one at a time": ratio}, command.strip())
    print(f"Ratios recorded in {path}")


if __name__ == "__main__":
    main()
