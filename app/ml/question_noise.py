"""Question noise: each time a question is trained, some of its tokens are dropped, so its
answer is keyed to the question's words rather than to its exact wording (measured on a
real model: reworded questions answered right 17% → 43%, docs/benchmarks.md).

Each token goes with the same chance, but a question whose kept tokens would fit another
question with another answer is drawn again, or trained whole: on 200 look-alike
questions ("… for the Vobex server room 17?") drops alone left 17% of them fitting
another, which no model can learn to answer; none is left so. Dropping the tokens many
questions share first (UDA's TF-IDF word replacement, Xie et al. 2019) was measured too
and not kept: it kept the keywords a rewording changes, and the staff FAQ's rewordings
fell from 13 to 9 of 30 right (docs/benchmarks.md).
"""

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from app.ml.data import Example

DRAWS = 4  # tries at a drop that still tells the question apart, then the question whole


class QuestionNoise:
    """Drops tokens of the job's questions, knowing all of them."""

    def __init__(self, examples: Sequence[Example], share: float) -> None:
        self.share = share
        # Each question's tokens and its answer's: the questions a noisy one must not fit
        self._bags: list[Counter[int]] = []
        self._answers: list[tuple[int, ...]] = []
        self._holding: dict[int, set[int]] = {}  # token → the questions that hold it
        for example in examples:
            if example.question is None:
                continue
            start, end = example.question
            bag = Counter(example.input_ids[start:end])
            for token in bag:
                self._holding.setdefault(token, set()).add(len(self._bags))
            self._bags.append(bag)
            self._answers.append(tuple(example.input_ids[example.prompt_len :]))

    def __call__(self, example: Example, rng: random.Random) -> Example:
        """A copy of `example` with about `share` of its question's tokens dropped; itself
        where it has no known question or no drop still tells it apart."""
        if example.question is None or self.share <= 0:
            return example
        start, end = example.question
        question = example.input_ids[start:end]
        answer = tuple(example.input_ids[example.prompt_len :])
        for _ in range(DRAWS):
            kept = [token for token in question if rng.random() >= self.share]
            kept = kept or [rng.choice(question)]
            if len(kept) < len(question) and not self._fits_another(kept, answer):
                return _with_question(example, kept)
        return example

    def _fits_another(self, kept: list[int], answer: tuple[int, ...]) -> bool:
        """Whether a question of another answer holds every kept token (as often)."""
        wanted = Counter(kept)
        holders = [self._holding.get(token, set()) for token in wanted]
        candidates = set.intersection(*sorted(holders, key=len))
        return any(
            self._answers[index] != answer
            and all(self._bags[index][token] >= times for token, times in wanted.items())
            for index in candidates
        )


def _with_question(example: Example, kept: list[int]) -> Example:
    start, end = example.question or (0, 0)
    dropped = end - start - len(kept)
    return replace(
        example,
        input_ids=example.input_ids[:start] + kept + example.input_ids[end:],
        prompt_len=example.prompt_len - dropped,
        question=(start, start + len(kept)),
        origin=example.origin or example,
    )
