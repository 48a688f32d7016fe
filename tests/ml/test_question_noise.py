"""Question noise drops a share of a question's tokens, never leaving one that fits another."""

import random
from collections import Counter

from app.ml.data import Example
from app.ml.question_noise import QuestionNoise

# Token ids of a template every question shares, then what tells each apart
TEMPLATE = [10, 11, 12, 13, 14, 15]  # "What is the access code for the"
PLACES = [20, 21, 22]  # "meeting room", "lab", "garage"
NAMES = [30, 31, 32, 33]
DIGITS = list(range(40, 50))
PROMPT_START, PROMPT_END = [1, 2], [3]
QUESTION_MARK = 99


def _example(question: list[int], answer: list[int]) -> Example:
    ids = PROMPT_START + question + PROMPT_END + answer
    start = len(PROMPT_START)
    return Example(ids, len(ids) - len(answer), question=(start, start + len(question)))


def _look_alikes(count: int) -> list[Example]:
    """Questions alike but for a name, a place and a number, each with its own answer."""
    rng = random.Random(0)
    examples = []
    for index in range(count):
        number = [DIGITS[int(digit)] for digit in str(index + 1)]
        question = TEMPLATE + [rng.choice(NAMES), rng.choice(PLACES)] + number + [QUESTION_MARK]
        examples.append(_example(question, [100 + index, 7, 8]))
    return examples


def _question(example: Example) -> list[int]:
    start, end = example.question or (0, 0)
    return example.input_ids[start:end]


def test_about_the_share_of_a_questions_tokens_goes_each_time_and_the_answer_stays() -> None:
    examples = _look_alikes(60)
    noise = QuestionNoise(examples, 0.3)
    rng = random.Random(1)
    total = kept_total = 0
    for _ in range(20):
        for example in examples:
            noisy = noise(example, rng)
            total += len(_question(example))
            kept_total += len(_question(noisy))
            assert noisy.input_ids[noisy.prompt_len :] == example.input_ids[example.prompt_len :]
    assert 0.2 < 1 - kept_total / total < 0.35


def test_a_noisy_question_never_fits_another_answers_question() -> None:
    examples = _look_alikes(120)
    noise = QuestionNoise(examples, 0.3)
    bags = [(Counter(_question(e)), e.input_ids[e.prompt_len :]) for e in examples]
    rng = random.Random(2)
    noisy_count = 0
    for _ in range(10):
        for example in examples:
            noisy = noise(example, rng)
            if noisy is example:
                continue
            noisy_count += 1
            kept = Counter(_question(noisy))
            fitting = [
                answer
                for bag, answer in bags
                if all(bag[token] >= times for token, times in kept.items())
            ]
            assert fitting == [example.input_ids[example.prompt_len :]]
            assert noisy.origin is example
    # Most draws find a drop that still tells the question apart (a question here differs
    # from others by a name, a place and a number only: 3 or 4 of its 10 or 11 tokens)
    assert noisy_count > 600, noisy_count


def test_a_question_of_the_same_answer_is_not_another() -> None:
    # A rewording trained with the same answer holds the same words: no reason to keep whole
    asked = _example([10, 11, 30, 20], [200, 7])
    reworded = _example([12, 10, 11, 30, 20], [200, 7])
    noise = QuestionNoise([asked, reworded], 0.5)
    rng = random.Random(3)
    assert any(noise(asked, rng) is not asked for _ in range(20))


def test_no_share_or_no_known_question_leaves_the_example_alone() -> None:
    example = _example([10, 11, 30], [200])
    unknown = Example([1, 2, 3, 4], 3)
    assert QuestionNoise([example], 0.0)(example, random.Random(0)) is example
    assert QuestionNoise([example], 0.3)(unknown, random.Random(0)) is unknown
