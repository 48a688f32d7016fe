"""A training run as its supervisor sees it, and what it sends: events while it trains,
then how it ended.

The local executor carries the messages over a pipe from its child process, the Ray
executor through a channel actor; everything here pickles.
"""

from typing import Protocol

from app.jobs.outcomes import Outcome, Reported
from app.ml.events import StopRequest, TrainingEvent

ChildMessage = TrainingEvent | Reported


class Run(Protocol):
    """One training run as its supervisor sees it, wherever it executes."""

    def receive(self) -> list[ChildMessage] | None:
        """What the run said since the last call, waiting up to about half a second;
        None once it has ended and everything it said was received."""
        ...

    def ask(self, request: StopRequest) -> None:
        """Cancel (stop now, save nothing) or pause (stop at a checkpoint)."""
        ...

    def kill(self) -> None:
        """It did not stop when asked: end it now, freeing its device."""
        ...

    def silent_end(self) -> Outcome:
        """How it ended, for a run that ended without sending an outcome."""
        ...
