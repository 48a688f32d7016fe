"""General prompts shipped with qatune, for keeping what a base model knew.

PROBES: general questions with the words a right answer holds. Before a job trains, the
base's answers to them are recorded; the ones it answers right are what it knew, and the
forgetting meter (training/forgetting.py) asks the tuned model them again. A base that
answers none (builtin:tiny, whose weights are random) knew nothing to keep.

REPLAY: everyday instructions whose base answers are mixed into training (the base's own
words as targets), so that what the adapter learns for the FAQ does not overwrite how the
model answers everything else.

SMALL_TALK: greetings, thanks, farewells and one-word replies. An adapter's scope (scope.py)
is fitted to keep these outside, with the replay prompts: fitted on sentences alone, it
put 23 to 27 of 30 such short messages inside on three FAQs, and "hi" got a FAQ answer.

All three are data, in general_prompts.json beside this file. They are kept apart from the
benchmark's own questions (bench/data/general.json), which measure the outcome: the meter
and the replay are not tuned to the measurement.
"""

import json
from dataclasses import dataclass
from pathlib import Path

BROKEN_BELOW = 0.8  # of what the model knew: below this, a job says it broke the model
KEEP_ANSWERS_AT_LEAST = 0.95  # of a fine-tuned model's answers, trained further: the promise


@dataclass(frozen=True)
class Probe:
    question: str
    facts: tuple[str, ...]  # one of these, in the answer, makes it right


_DATA = json.loads((Path(__file__).parent / "general_prompts.json").read_text("utf-8"))
PROBES: tuple[Probe, ...] = tuple(Probe(p["question"], tuple(p["facts"])) for p in _DATA["probes"])
# Everyday instructions, then short questions of fact answered as the model answers them: a
# FAQ's questions look like these, and without them the adapter learns that any question
# wants a FAQ answer.
REPLAY: tuple[str, ...] = (*_DATA["replay"]["instructions"], *_DATA["replay"]["short_facts"])
SMALL_TALK: tuple[str, ...] = tuple(_DATA["small_talk"])
