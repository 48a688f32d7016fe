"""Quality on a real pretrained model: the three figures a user means, for any method.

    python -m bench.quality_real --sets staff product --hp epochs=8 ...
    python -m bench.quality_real --train-rewordings 1    # each pair's first rewording trained
    python -m bench.quality_real --sets codes:200        # 200 look-alike pairs (faq_data)
    python -m bench.quality_real --then dpo rft          # and each method after SFT
    python -m bench.quality_real --system "You are …"    # every pair under a system prompt

A FAQ of bench/data (written for these measurements, never seen by the defaults' tuning of
builtin:tiny: tests/data is not used) is trained with `qatune train` on the real model in a
child process, then the saved adapter is asked through the serving engine, greedily, as the
service answers:

  trained   the trained questions: the answer exactly as trained
  reworded  the same questions worded otherwise (2 a pair): the answer holds the right fact;
            with --train-rewordings K the first K of each pair are trained (the data's
            `rewordings`) and only the others asked (--ask-rewordings-from K compares a run
            without them on the same questions)
  general   40 general questions (bench/data/general.json): of those the base answers
            right, the share the tuned model still answers right

With --then, the SFT adapter is trained further, as a user would, with `qatune train
--start-from` (and --keep-data, the SFT's own pairs, as the service keeps them):

  dpo       every third answer preferred with a follow-up line after it, the trained one
            not: "moved" counts those now given with it, "trained" every answer as it
            should now be (the rest unchanged)
  rft       each pair's first rewording as the prompt, a string_check grader rewarding an
            answer that holds the fact; the rewordings asked start at the second

A fact is right when one of its listed spellings is in the answer (case aside; a number
only as a whole number: "7" is not in "17").

Under each row, where the adapter's scope sent the questions (the adapter or the base) and
how each side fared; once at the start, how many of the general questions it knows the
base still answers right asked in a batch among other rows: a loss in "general kept" that
the scope gave to the base is that noise, not the adapter's.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.ml.training.adapter_metadata import read_adapter_metadata
from app.ml.training.keeping import holds  # the forgetting meter's own rule
from bench.faq_data import faq_with_rewordings
from bench.train_throughput import ROOT

DATA = Path(__file__).parent / "data"
MODEL = "smollm2-135m-instruct"


@dataclass(frozen=True)
class Faq:
    name: str
    pairs: list[dict[str, Any]]  # question, answer, facts, reworded

    def training_records(
        self, rewordings: int = 0, system: str | None = None
    ) -> list[dict[str, Any]]:
        """Each pair, with its first `rewordings` rewordings trained beside it, asked under
        `system` if given."""
        return [
            {"question": p["question"], "answer": p["answer"]}
            | ({"rewordings": p["reworded"][:rewordings]} if rewordings else {})
            | ({"system": system} if system else {})
            for p in self.pairs
        ]


def faq(name: str) -> Faq:
    """A FAQ of bench/data by name, or `codes:N`: N look-alike access-code questions made
    by bench.faq_data (the sizes the written FAQs do not reach)."""
    if name.startswith("codes:"):
        return Faq(name, faq_with_rewordings(int(name.removeprefix("codes:"))))
    data = json.loads((DATA / f"{name}_faq.json").read_text())
    return Faq(name, data["pairs"])


def general() -> list[dict[str, Any]]:
    return list(json.loads((DATA / "general.json").read_text())["questions"])


def small_talk() -> list[str]:
    """Greetings, thanks and the like: none is a FAQ's question, the base should answer."""
    return list(json.loads((DATA / "small_talk.json").read_text())["messages"])


def train(
    model: str,
    records: list[dict[str, Any]],
    scratch: Path,
    model_cache: Path,
    hp: dict[str, str],
    further: list[str] = [],  # noqa: B006 (never changed)
    log: Path | None = None,
) -> tuple[Path, dict[str, Any], float]:
    """`qatune train` in a child process: the adapter, its metrics, the wall seconds.
    `further`: options of a job that trains an adapter further (--start-from, …); `log`:
    where its log goes."""
    data = scratch / "train.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    options = [arg for key, value in hp.items() for arg in (f"--{key.replace('_', '-')}", value)]
    model_option = [] if further else ["--base-model", model]  # a start names its own base
    command = [
        sys.executable, "-m", "app.cli", "train", *model_option, "--data", str(data),
        "--output", str(scratch / "adapter"), "--metrics-json", str(scratch / "metrics.json"),
        *options, *further,
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("QATUNE_")}
    env |= {"QATUNE_DATA_DIR": str(scratch / "d"), "QATUNE_OFFLINE": "true"}
    (scratch / "d").mkdir(exist_ok=True)
    if not (scratch / "d" / "models").exists():
        (scratch / "d" / "models").symlink_to(model_cache)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(done.stderr)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    wall = time.perf_counter() - started
    return scratch / "adapter", json.loads((scratch / "metrics.json").read_text()), wall


class Asker:
    """The serving engine of the service, on this machine's device plan."""

    def __init__(self, model: str, model_cache: Path) -> None:
        from app.ml.device import plan_device, probe_capabilities
        from app.ml.query_service import QueryService
        from app.ml.serving.requests import EngineLimits

        plan = plan_device(probe_capabilities(), "auto", None)
        self.service = QueryService(
            device_plan=plan,
            model_cache_dir=model_cache,
            offline=True,
            limits=EngineLimits(max_waiting=10_000),
        )
        self.engine = self.service.engine(model)

    def answers(
        self,
        questions: list[str],
        adapter: Path | None,
        max_tokens: int = 96,
        base_under_system: bool = False,
    ) -> list[str]:
        """`base_under_system`: a question the scope gives the base is asked under the
        adapter's system prompt too (as served before 2026-12-03), to compare."""
        from app.ml.serving.asking import Row, ask, chat_ids, question_ids
        from app.ml.serving.requests import AdapterRef, Sampling
        from app.ml.training.adapter_metadata import read_adapter_metadata

        ref = AdapterRef(str(adapter), adapter) if adapter else None
        system = read_adapter_metadata(adapter).system_prompt if adapter else None
        rows = [
            Row(
                chat_ids(self.engine.tokenizer, [{"role": "user", "content": q}],
                         system_prompt=system),
                ref,
                Sampling(max_tokens=max_tokens),
                question_ids=question_ids(self.engine.tokenizer, q),  # as the service asks
                base_prompt_ids=chat_ids(self.engine.tokenizer, [{"role": "user", "content": q}])
                if system and not base_under_system else None,  # the adapter's alone
            )
            for q in questions
        ]  # fmt: skip
        choices = ask(self.engine, rows, seconds=3600).answer()
        return [c.answer.strip() for c in choices]

    def adapter_answers(self, questions: list[str], adapter: Path) -> list[bool]:
        """Whether the adapter's scope gives each question to the adapter (True) or to the
        base, as serving decides it (the adapter must have been asked once: loaded)."""
        from app.ml.serving.asking import question_ids
        from app.ml.serving.engine import Engine

        engine = self.engine
        assert isinstance(engine, Engine)  # the built-in engine: vLLM serves with no scope
        key, adapters = str(adapter), engine.adapters
        ids = [question_ids(engine.tokenizer, q) for q in questions]
        return engine.call(lambda: [adapters.answering(key, i, frozenset()) == key for i in ids])

    def close(self) -> None:
        self.engine.close()


@dataclass
class Scores:
    trained: tuple[int, int]
    reworded: tuple[int, int]
    general: tuple[int, int]  # kept, of those the base knew
    wall: float = 0.0
    epochs: float = 0.0

    def row(self) -> str:
        def share(pair: tuple[int, int]) -> str:
            right, total = pair
            return f"{right}/{total} ({right / max(1, total):.0%})"

        return f"{share(self.trained)} | {share(self.reworded)} | {share(self.general)}"


def score(
    asker: Asker,
    data: Faq,
    adapter: Path | None,
    base_general: list[bool],
    held_out_from: int = 0,
    expected: list[str] | None = None,
) -> tuple[Scores, dict[str, Any]]:
    """`held_out_from`: the rewordings asked start there (those before it were trained);
    `expected`: each trained question's answer (default: the FAQ's)."""
    pairs = data.pairs
    expected = expected or [p["answer"] for p in pairs]
    trained_q = [p["question"] for p in pairs]
    reworded_q = [(q, p["facts"]) for p in pairs for q in p["reworded"][held_out_from:]]
    questions = general()
    general_q = [g["question"] for g in questions]
    trained = asker.answers(trained_q, adapter, max_tokens=128)
    reworded = asker.answers([q for q, _ in reworded_q], adapter)
    asked = asker.answers(general_q, adapter)
    exact = sum(a == e.strip() for a, e in zip(trained, expected, strict=True))
    reworded_right = [holds(a, f) for a, (_, f) in zip(reworded, reworded_q, strict=True)]
    known = [i for i, right in enumerate(base_general) if right]
    lost = [general_q[i] for i in known if not holds(asked[i], questions[i]["facts"])]
    answers: dict[str, Any] = {"trained": trained, "reworded": reworded, "general": asked}
    if adapter is not None and read_adapter_metadata(adapter).system_prompt:
        under = asker.answers(general_q, adapter, base_under_system=True)
        answers["general_kept_base_under_system"] = sum(
            holds(under[i], questions[i]["facts"]) for i in known
        )
    if adapter is not None:
        # Who answered: the adapter, or the base where the scope sent the question there
        answers["to_adapter"] = {
            "trained": asker.adapter_answers(trained_q, adapter),
            "reworded": asker.adapter_answers([q for q, _ in reworded_q], adapter),
            "general": asker.adapter_answers(general_q, adapter),
            "small_talk": asker.adapter_answers(small_talk(), adapter),
        }
        answers["reworded_right"] = reworded_right
        answers["general_lost"] = lost
    scores = Scores(
        (exact, len(pairs)),
        (sum(reworded_right), len(reworded_q)),
        (len(known) - len(lost), len(known)),
    )
    return scores, answers


def routing(answers: dict[str, Any], base_general: list[bool]) -> str:
    """Where the scope sent the questions, and how those of each side fared."""
    to = answers["to_adapter"]
    right = answers["reworded_right"]
    by_adapter = [r for r, a in zip(right, to["reworded"], strict=True) if a]
    by_base = [r for r, a in zip(right, to["reworded"], strict=True) if not a]
    known = [a for a, k in zip(to["general"], base_general, strict=True) if k]
    return (
        f"scope: adapter answered {sum(to['trained'])}/{len(to['trained'])} trained, "
        f"{len(by_adapter)}/{len(right)} reworded ({sum(by_adapter)} right; the base "
        f"{sum(by_base)} of {len(by_base)} right), {sum(known)}/{len(known)} known general, "
        f"{sum(to['small_talk'])}/{len(to['small_talk'])} small talk; "
        f"general lost: {answers['general_lost']}"
        + (
            f"; with the base asked under the trained system prompt too, general kept "
            f"{answers['general_kept_base_under_system']}/{len(known)}"
            if "general_kept_base_under_system" in answers
            else ""
        )
    )


def base_knows(asker: Asker) -> list[bool]:
    questions = general()
    asked = asker.answers([g["question"] for g in questions], None)
    return [holds(a, g["facts"]) for a, g in zip(asked, questions, strict=True)]


def base_among_others(asker: Asker, base_general: list[bool], others: list[str]) -> str:
    """The base's own steadiness: the general questions it knows, asked again in a batch
    with other rows (as serving batches them), still answered right. In bf16 a greedy
    answer near a tie can change with the batch; "general kept" cannot be read finer."""
    questions = general()
    asked = [g["question"] for g in questions]
    mixed = [q for pair in zip(others, asked, strict=False) for q in pair] + asked[len(others) :]
    answers = dict(zip(mixed, asker.answers(mixed, None), strict=True))
    known = [g for g, k in zip(questions, base_general, strict=True) if k]
    kept = sum(holds(answers[g["question"]], g["facts"]) for g in known)
    return f"the base among other rows keeps {kept}/{len(known)} of the general questions it knows"


def parse_hp(values: list[str]) -> dict[str, str]:
    return dict(value.split("=", 1) for value in values)


# DPO after SFT: the team prefers every third answer with a line of its own after it
FOLLOW_UP = "If this does not help, ask at the front desk."
MOVED_EVERY = 3
# RFT after SFT: each pair's first rewording, rewarded when the answer holds the fact
FACT_GRADER = {
    "type": "string_check",
    "name": "holds the fact",
    "input": "{{sample.output_text}}",
    "reference": "{{item.fact}}",
    "operation": "ilike",
}


@dataclass(frozen=True)
class Further:
    """A job that trains the SFT adapter further: its records, its options, and every
    trained question's answer as the tuned model should then give it."""

    method: str
    records: list[dict[str, Any]]
    expected: list[str]
    moved: list[int]  # the pairs whose answer the job changes


def preferring(data: Faq) -> Further:
    """OpenAI preference records for every third pair: the trained answer non-preferred,
    the same answer with the team's follow-up line preferred."""
    records, expected, moved = [], [], []
    for index, pair in enumerate(data.pairs):
        answer = pair["answer"].strip()
        if index % MOVED_EVERY:
            expected.append(answer)
            continue
        preferred = f"{answer} {FOLLOW_UP}"
        expected.append(preferred)
        moved.append(index)
        records.append({
            "input": {"messages": [{"role": "user", "content": pair["question"]}]},
            "preferred_output": [{"role": "assistant", "content": preferred}],
            "non_preferred_output": [{"role": "assistant", "content": answer}],
        })  # fmt: skip
    return Further("dpo", records, expected, moved)


def reinforcing(data: Faq) -> Further:
    """OpenAI RFT records: each pair's first rewording as the prompt, its fact for the
    grader (FACT_GRADER)."""
    records = [
        {"messages": [{"role": "user", "content": p["reworded"][0]}], "fact": p["facts"][0]}
        for p in data.pairs
    ]
    return Further("rft", records, [p["answer"].strip() for p in data.pairs], [])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sets", nargs="+", default=["staff", "product"])
    parser.add_argument("--hp", nargs="*", default=[], help="name=value, as qatune train's")
    parser.add_argument("--model", default=MODEL)
    parser.add_argument(
        "--model-cache",
        type=Path,
        default=Path.home() / ".cache" / "qatune" / "bench-models",
        help="where the real model is read into once (kept across runs)",
    )
    parser.add_argument("--answers", type=Path, help="write every answer here (JSON)")
    parser.add_argument("--logs", type=Path, help="write each job's log into this folder")
    parser.add_argument(
        "--train-rewordings",
        type=int,
        default=0,
        help="train each pair's first K rewordings with it (its `rewordings`), ask the rest",
    )
    parser.add_argument(
        "--ask-rewordings-from",
        type=int,
        help="ask each pair's rewordings from the K-th on (default: those not trained), so "
        "that runs with and without trained rewordings are scored on the same questions",
    )
    parser.add_argument(
        "--system",
        help="train every pair under this system prompt (the adapter is served with it), and "
        "also score general questions with the base asked under it, as served before",
    )
    parser.add_argument(
        "--then",
        nargs="*",
        choices=["dpo", "rft"],
        default=[],
        help="after SFT, train its adapter further with each (DPO: every third answer "
        "preferred with a follow-up line; RFT: the first rewordings, graded on the fact) "
        "and score that too; with rft the rewordings asked start at the second",
    )
    args = parser.parse_args()
    hp = parse_hp(args.hp)
    held_out_from = args.ask_rewordings_from
    if held_out_from is None:
        held_out_from = max(args.train_rewordings, 1 if "rft" in args.then else 0)
    with tempfile.TemporaryDirectory(prefix="qatune-quality-") as tmp:
        cache = args.model_cache
        cache.mkdir(parents=True, exist_ok=True)
        asker = Asker(args.model, cache)
        base = base_knows(asker)
        print(f"base knows {sum(base)}/{len(base)} general questions; hp {hp}", flush=True)
        others = [p["question"] for name in args.sets for p in faq(name).pairs]
        print(base_among_others(asker, base, others), flush=True)
        print(
            "| set | method | trained exact | reworded, right fact | general kept | moved "
            "| starting answers kept | epochs | wall s |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|", flush=True)
        dump: dict[str, Any] = {}
        for name in args.sets:
            data = faq(name)
            scratch = Path(tempfile.mkdtemp(dir=tmp))
            records = data.training_records(args.train_rewordings, args.system)
            log = args.logs / f"{name}.log" if args.logs else None
            adapter, metrics, wall = train(args.model, records, scratch, cache, hp, log=log)
            scores, answers = score(asker, data, adapter, base, held_out_from)
            print(
                f"| {name} | sft | {scores.row()} | – | – | {_epochs(metrics)} | {wall:.0f} |",
                flush=True,
            )
            print(routing(answers, base), flush=True)
            dump[name] = {"scores": scores.__dict__, "metrics": metrics, "answers": answers}
            for method in args.then:
                further = preferring(data) if method == "dpo" else reinforcing(data)
                log = args.logs / f"{name}-{method}.log" if args.logs else None
                row, dump[f"{name}:{method}"] = train_further(
                    args.model, further, data, adapter, Path(tempfile.mkdtemp(dir=tmp)),
                    cache, hp, asker, base, held_out_from, log,
                )  # fmt: skip
                print(f"| {name} | {method} after sft | {row}", flush=True)
        asker.close()
        if args.answers:
            args.answers.write_text(json.dumps(dump, indent=1, ensure_ascii=False))


def train_further(
    model: str,
    further: Further,
    data: Faq,
    adapter: Path,
    scratch: Path,
    cache: Path,
    hp: dict[str, str],
    asker: Asker,
    base: list[bool],
    held_out_from: int,
    log: Path | None,
) -> tuple[str, dict[str, Any]]:
    """The SFT adapter trained further as `further` says, scored: its table row's cells
    after the method's, and what the answers file keeps."""
    options = ["--start-from", str(adapter), "--keep-data", str(adapter.parent / "train.jsonl")]
    if further.method == "rft":
        grader = scratch / "grader.json"
        grader.write_text(json.dumps(FACT_GRADER))
        options += ["--grader", str(grader)]
    tuned, metrics, wall = train(model, further.records, scratch, cache, hp, options, log)
    scores, answers = score(asker, data, tuned, base, held_out_from, further.expected)
    moved = sum(answers["trained"][i] == further.expected[i] for i in further.moved)
    moved_cell = f"{moved}/{len(further.moved)}" if further.moved else "–"
    kept = metrics.get("kept_answers")
    kept_cell = f"{kept}/{metrics.get('keep_answers')}" if kept is not None else "–"
    row = f"{scores.row()} | {moved_cell} | {kept_cell} | {_epochs(metrics)} | {wall:.0f} |"
    print(routing(answers, base), flush=True)
    return row, {"scores": scores.__dict__, "metrics": metrics, "answers": answers}


def _epochs(metrics: dict[str, Any]) -> str:
    return f"{metrics.get('epochs', 0):g}"


if __name__ == "__main__":
    main()
