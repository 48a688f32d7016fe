"""An eval run's states, the one table of moves between them, and what changes with each.

queued ──start──► in_progress ──► completed
  │                   │
  └──► canceled ◄─────┤   (a user's cancel: the runner stops at once, its graders killed)
  └──► failed   ◄─────┘   (a model deleted mid-run, the service stopped, an error)

`move` checks a change against the table and says what changes with it; the evals service
applies it to a loaded run (`services/evals/lifecycle.py` `transition`), and nothing else sets a
run's status. `actions` says what a user may do to a run now.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from app.core.errors import ConflictError
from app.core.language import tr


class RunStatus(StrEnum):
    QUEUED = "queued"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    CANCELED = "canceled"  # OpenAI's spelling for runs (jobs are "cancelled")
    FAILED = "failed"


QUEUED, IN_PROGRESS, COMPLETED, CANCELED, FAILED = RunStatus
UNFINISHED = frozenset({QUEUED, IN_PROGRESS})
MOVES: Mapping[RunStatus, frozenset[RunStatus]] = {
    QUEUED: frozenset({IN_PROGRESS, CANCELED, FAILED}),
    IN_PROGRESS: frozenset({COMPLETED, CANCELED, FAILED}),
    COMPLETED: frozenset(),
    CANCELED: frozenset(),
    FAILED: frozenset(),
}


class IllegalRunMove(ConflictError):
    """The table has no such move (a 409: the run is not in a state that allows it)."""


@dataclass(frozen=True)
class RunMove:
    status: RunStatus
    finished_at: datetime | None  # set when the run ends


def move(source: str, target: RunStatus, *, now: datetime) -> RunMove:
    current = RunStatus(source)
    if target not in MOVES[current]:
        raise IllegalRunMove(
            tr("The run is {status}; it cannot become {target}", status=current, target=target)
        )
    return RunMove(target, now if not MOVES[target] else None)


class RunFacts(Protocol):
    @property
    def status(self) -> str: ...


class RunAction(StrEnum):
    CANCEL = "cancel"
    DELETE = "delete"


def actions(run: RunFacts) -> list[RunAction]:
    return [RunAction.CANCEL] if RunStatus(run.status) in UNFINISHED else [RunAction.DELETE]
