"""`text_similarity`: how close an answer is to a reference, between 0 and 1.

Pure Python, no data files, any language: words are runs of letters and digits, each
Chinese, Japanese or Korean character is a word of its own, and punctuation marks are
tokens for BLEU and GLEU. Longest common subsequences are bit-parallel (Hyyrö), so long
answers cost milliseconds.

- fuzzy_match: 2·LCS / (|a| + |b|) over characters (rapidfuzz's `fuzz.ratio` / 100).
- bleu: sentence BLEU-4 with exponential smoothing and effective order (sacrebleu's
  sentence_bleu), case-sensitive.
- gleu: Google-BLEU (Wu et al. 2016): min(precision, recall) over all 1-4-grams.
- meteor: Banerjee and Lavie's F-mean (alpha 0.9) with the fragmentation penalty (beta 3,
  gamma 0.5), on exact lower-cased word matches: no stemming or WordNet synonyms, which
  would need data files this service cannot assume.
- rouge_1 … rouge_5, rouge_l: F1 of n-gram overlap and of the LCS, lower-cased words
  (rouge-score's, without its English-only tokenizer).
- cosine: needs an embedding model; qatune has none, so it is refused when the grader is
  checked (services/evals/graders.py).
"""

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Literal

Metric = Literal[
    "cosine",
    "fuzzy_match",
    "bleu",
    "gleu",
    "meteor",
    "rouge_1",
    "rouge_2",
    "rouge_3",
    "rouge_4",
    "rouge_5",
    "rouge_l",
]
CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
TOKEN = re.compile(rf"[{CJK}]|[^\W_{CJK}]+(?:['’][^\W_{CJK}]+)*|[^\w\s]", re.UNICODE)
WORD = re.compile(r"\w", re.UNICODE)


def tokens(text: str) -> list[str]:
    """Words, single CJK characters and punctuation marks, in order."""
    return TOKEN.findall(text)


def words(text: str) -> list[str]:
    """Lower-cased words and CJK characters, punctuation dropped."""
    return [t.lower() for t in tokens(text) if WORD.match(t)]


def lcs_length(a: Sequence[object], b: Sequence[object]) -> int:
    """The length of the longest common subsequence (Hyyrö's bit-vector algorithm)."""
    if not a or not b:
        return 0
    masks: dict[object, int] = {}
    for i, x in enumerate(a):
        masks[x] = masks.get(x, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for y in b:
        u = v & masks.get(y, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def _f1(overlap: float, candidate: int, reference: int) -> float:
    if overlap == 0 or candidate == 0 or reference == 0:
        return 0.0
    precision, recall = overlap / candidate, overlap / reference
    return 2 * precision * recall / (precision + recall)


def _ngrams(seq: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(tuple(seq[i : i + n]) for i in range(len(seq) - n + 1))


def fuzzy_match(answer: str, reference: str) -> float:
    total = len(answer) + len(reference)
    return 1.0 if total == 0 else 2 * lcs_length(answer, reference) / total


def rouge_n(n: int) -> Callable[[str, str], float]:
    def score(answer: str, reference: str) -> float:
        got, want = _ngrams(words(answer), n), _ngrams(words(reference), n)
        return _f1(sum((got & want).values()), sum(got.values()), sum(want.values()))

    return score


def rouge_l(answer: str, reference: str) -> float:
    got, want = words(answer), words(reference)
    return _f1(lcs_length(got, want), len(got), len(want))


def bleu(answer: str, reference: str, max_order: int = 4) -> float:
    got, want = tokens(answer), tokens(reference)
    if not got or not want:
        return float(got == want)
    order = min(max_order, len(got))  # effective order: no n-grams longer than the answer
    log_precision, smoothing = 0.0, 1.0
    for n in range(1, order + 1):
        candidate = _ngrams(got, n)
        matches = sum((candidate & _ngrams(want, n)).values())
        total = sum(candidate.values())
        if matches == 0 and n == 1:
            return 0.0  # no word in common: nothing to smooth
        if matches == 0:
            smoothing *= 2  # sacrebleu's "exp": 1 / (2^k · total) for the k-th empty order
            log_precision += math.log(1 / (smoothing * total))
        else:
            log_precision += math.log(matches / total)
    brevity = 1.0 if len(got) > len(want) else math.exp(1 - len(want) / len(got))
    return brevity * math.exp(log_precision / order)


def gleu(answer: str, reference: str, max_order: int = 4) -> float:
    got, want = tokens(answer), tokens(reference)
    candidate: Counter[tuple[str, ...]] = Counter()
    wanted: Counter[tuple[str, ...]] = Counter()
    for n in range(1, max_order + 1):
        candidate += _ngrams(got, n)
        wanted += _ngrams(want, n)
    matches = sum((candidate & wanted).values())
    if not candidate or not wanted:
        return float(not candidate and not wanted)
    return min(matches / sum(candidate.values()), matches / sum(wanted.values()))


def meteor(answer: str, reference: str, alpha: float = 0.9, beta: float = 3.0,
           gamma: float = 0.5) -> float:  # fmt: skip
    got, want = words(answer), words(reference)
    pairs = _align(got, want)
    if not pairs:
        return 0.0
    matched = len(pairs)
    precision, recall = matched / len(got), matched / len(want)
    f_mean = precision * recall / (alpha * precision + (1 - alpha) * recall)
    chunks = 1 + sum(
        1 for (i, j), (k, m) in zip(pairs, pairs[1:], strict=False) if k != i + 1 or m != j + 1
    )
    return f_mean * (1 - gamma * (chunks / matched) ** beta)


def _align(got: list[str], want: list[str]) -> list[tuple[int, int]]:
    """Exact word matches, one to one, each answer word to the nearest free reference
    position after the last match where it can (fewer chunks), in answer order."""
    free: dict[str, list[int]] = {}
    for j, word in enumerate(want):
        free.setdefault(word, []).append(j)
    pairs: list[tuple[int, int]] = []
    last = -1
    for i, word in enumerate(got):
        places = free.get(word)
        if not places:
            continue
        after = [j for j in places if j > last]
        j = after[0] if after else places[0]
        places.remove(j)
        pairs.append((i, j))
        last = j
    return sorted(pairs)


METRICS: dict[str, Callable[[str, str], float]] = {
    "fuzzy_match": fuzzy_match,
    "bleu": bleu,
    "gleu": gleu,
    "meteor": meteor,
    **{f"rouge_{n}": rouge_n(n) for n in range(1, 6)},
    "rouge_l": rouge_l,
}


def similarity(metric: Metric, answer: str, reference: str) -> float:
    return METRICS[metric](answer, reference)
