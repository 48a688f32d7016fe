"""text_similarity's metrics, side by side with the libraries people score with.

    python -m bench.grader_metrics

On answers of 20, 200 and 2,000 words (a reference and an answer that shares most of its
words, reordered in places), each metric is computed by qatune's grader and by its
reference implementation in this process, best of 5: rouge_l and rouge_2 against
rouge-score, bleu against sacrebleu's sentence_bleu, fuzzy_match against rapidfuzz's
`fuzz.ratio` (C++). The scores must agree (to 1e-9); the seconds and the ratios (reference
time over qatune's: above 1, qatune is faster) are reported.
"""

import random
import sys
import time
from collections.abc import Callable

import sacrebleu
from rapidfuzz import fuzz
from rouge_score import rouge_scorer

from app.graders.text_similarity import METRICS
from bench.results import record

WORDS = (
    "the order ships within three business days from our warehouse after payment clears and "
    "you can track it from your account page where every parcel shows its carrier and number"
).split()
LENGTHS = (20, 200, 2000)


def texts(words: int, seed: int) -> tuple[str, str]:
    rng = random.Random(seed)
    reference = [rng.choice(WORDS) for _ in range(words)]
    answer = list(reference)
    for _ in range(max(1, words // 10)):  # a tenth of the words changed or swapped
        i, j = rng.randrange(words), rng.randrange(words)
        answer[i], answer[j] = answer[j], rng.choice(WORDS)
    return " ".join(answer), " ".join(reference)


def best_of(
    fn: Callable[[str, str], float], answer: str, reference: str, rounds: int = 5
) -> tuple[float, float]:
    times, value = [], 0.0
    for _ in range(rounds):
        started = time.perf_counter()
        value = fn(answer, reference)
        times.append(time.perf_counter() - started)
    return min(times), value


def main() -> None:
    rouge_l, rouge_2 = rouge_scorer.RougeScorer(["rougeL"]), rouge_scorer.RougeScorer(["rouge2"])
    references: dict[str, Callable[[str, str], float]] = {
        "rouge_l": lambda a, r: rouge_l.score(r, a)["rougeL"].fmeasure,
        "rouge_2": lambda a, r: rouge_2.score(r, a)["rouge2"].fmeasure,
        "bleu": lambda a, r: sacrebleu.sentence_bleu(a, [r]).score / 100,
        "fuzzy_match": lambda a, r: fuzz.ratio(a, r) / 100,
    }
    ratios: dict[str, float] = {}
    print(f"{'metric':<12} {'words':>6} {'qatune ms':>10} {'reference ms':>13} {'ratio':>7}")
    for words in LENGTHS:
        answer, reference = texts(words, seed=words)
        for metric, theirs in references.items():
            ours_s, ours = best_of(METRICS[metric], answer, reference)
            ref_s, ref = best_of(theirs, answer, reference)
            assert abs(ours - ref) < 1e-9, (metric, words, ours, ref)
            ratio = ref_s / ours_s
            ratios[f"{metric}_{words}_words"] = ratio
            print(
                f"{metric:<12} {words:>6} {ours_s * 1e3:>10.3f} {ref_s * 1e3:>13.3f} {ratio:>7.2f}"
            )
    print(record("grader_metrics", ratios, "python -m bench.grader_metrics"), file=sys.stderr)


if __name__ == "__main__":
    main()
