"""How a training run stops early: cancelled, paused, or failed in a way the user can fix."""

from app.core.language import Sentence
from app.ml.events import StopRequest


class TrainingCancelled(Exception):
    """should_stop() asked to cancel; nothing was saved."""


class TrainingPaused(Exception):
    """should_stop() asked to pause: a checkpoint of the last whole step was saved."""

    def __init__(self, step: int) -> None:
        super().__init__(f"paused at step {step}")
        self.step = step


class TrainingFailed(Exception):
    """A failure the user can act on; the reason says how, in its reader's language."""

    def __init__(self, reason: Sentence) -> None:
        super().__init__(reason.english())
        self.reason = reason


def obey(stop: StopRequest | None) -> None:
    """Raise what a stop request asks for (between two micro-batches)."""
    match stop:
        case "cancel":
            raise TrainingCancelled()
        case "pause":
            raise TrainingPaused(-1)
