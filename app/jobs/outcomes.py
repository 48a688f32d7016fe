"""How a run ended, as typed values, and the one rule that turns an ending into a status.

The run reports `Reported` outcomes (it knows how it ended); a run that dies without a
word is `Interrupted`, found by its supervisor at once or, when the worker itself died, by
the recovery of orphaned jobs later. Both go through `verdict`.
"""

from dataclasses import dataclass
from enum import Enum, auto

from app.core.language import Sentence
from app.ml.hyperparameters import ResolvedHyperparameters
from app.ml.training.metrics import TrainingMetrics


@dataclass(frozen=True)
class Succeeded:
    metrics: TrainingMetrics
    hyperparameters: ResolvedHyperparameters


@dataclass(frozen=True)
class Cancelled:
    pass


@dataclass(frozen=True)
class Paused:
    """The run stopped at a checkpoint when asked to (a pause, or the service stopping)."""

    step: int


@dataclass(frozen=True)
class Failed:
    """The run cannot succeed as asked (bad settings, data, a model that does not fit)."""

    reason: Sentence  # what happened and what to do, in its reader's language


@dataclass(frozen=True)
class OutOfSpace:
    """The run could not write (a checkpoint, the adapter) for want of disk space: the job
    waits, paused, until there is room, then goes on from its newest checkpoint."""

    reason: Sentence  # the disk's state, in its reader's language


@dataclass(frozen=True)
class Interrupted:
    """The run died without saying why (killed, crashed): it may resume from a checkpoint."""

    reason: Sentence  # what is known of how it ended, in its reader's language
    # A death of the job's own run counts towards giving it up; its worker's death (the
    # service stopped or its host went away) does not.
    counts: bool = True


Reported = Succeeded | Cancelled | Paused | Failed | OutOfSpace  # how a run says it ended
Outcome = Reported | Interrupted


class Verdict(Enum):
    SUCCEED = auto()
    CANCEL = auto()
    PAUSE = auto()
    REQUEUE = auto()  # stopped cleanly (the service stopping): continues from a checkpoint
    RESUME_OR_GIVE_UP = auto()  # died: re-queued, unless it keeps dying without progress
    WAIT_FOR_SPACE = auto()  # paused until the disk has room again
    FAIL = auto()


def verdict(
    outcome: Outcome, *, cancel_requested: bool, pause_requested: bool, service_stopping: bool
) -> Verdict:
    """What the job becomes once its run has ended, whatever ended it."""
    if isinstance(outcome, Succeeded):
        return Verdict.SUCCEED
    if cancel_requested:  # a cancel that ended in a kill, or in a crash, is still a cancel
        return Verdict.CANCEL
    if pause_requested and isinstance(outcome, Paused | Interrupted):
        return Verdict.PAUSE  # a run that died while pausing resumes from its last checkpoint
    if isinstance(outcome, OutOfSpace):  # a restart would find the disk as full
        return Verdict.WAIT_FOR_SPACE
    if service_stopping or isinstance(outcome, Paused | Cancelled):
        return Verdict.REQUEUE
    if isinstance(outcome, Interrupted):
        return Verdict.RESUME_OR_GIVE_UP
    return Verdict.FAIL
