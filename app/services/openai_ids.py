"""qatune's things under the names OpenAI's API gives them, and back.

A file is a dataset (`file-12`), a fine-tuning job a job (`ftjob-7`), an eval
`eval_3` (its runs `evalrun_5`, their items `outputitem_9`), an event
`ftevent-7-31`, a checkpoint `ftckpt-7-40`. A trained model is
`ft:{base}:{owner}:{suffix}:ftjob-7`, one of its checkpoints the same with
`:ckpt-step-40` after it, as OpenAI names them. A name is read back only if it is exactly
the name of the job it points to, so a made-up owner or base does not reach anything.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from app.core.errors import BadRequest, NotFoundError
from app.core.language import deferred, tr
from app.core.names import number_in_digits
from app.db.models import Job

T = TypeVar("T")


@dataclass(frozen=True)
class Prefix:
    """One kind of name: this text, then a number (or two joined by "-": events and
    checkpoints are numbered within their job). Made and read back in one place; what a
    404 says where no such thing of the user's has the name (a template of {name})."""

    text: str
    missing: str = ""

    def of(self, *numbers: int) -> str:
        return self.text + "-".join(map(str, numbers))

    def number(self, name: str) -> int | None:
        """The number in this prefix + digits, or None if `name` is not such a name."""
        if not name.startswith(self.text):
            return None
        return number_in_digits(name.removeprefix(self.text))

    def find(self, name: str, lookup: Callable[[int], T | None]) -> T:
        """What `name` names, by `lookup` of its number (None or a NotFoundError where there
        is none); not found either way, the 404 says so in OpenAI's names rather than the
        native API's."""
        number = self.number(name)
        try:
            if number is not None and (found := lookup(number)) is not None:
                return found
        except NotFoundError:
            pass
        raise NotFoundError(tr(self.missing, name=name[:80]))

    def numbers(self, name: str) -> tuple[int, int] | None:
        """(a, b) from this prefix + a-b, or None."""
        if not name.startswith(self.text):
            return None
        first, _, second = name.removeprefix(self.text).partition("-")
        a, b = number_in_digits(first), number_in_digits(second)
        return None if a is None or b is None else (a, b)

    def after(self, name: str | None, *within: int) -> int | None:
        """A list's cursor: the number in `name`, the last id of the page before (None: the
        first page). `within` is the job whose events or checkpoints are listed. A name of
        another kind or job is a 400, not the first page again, which a client following
        pages would read as the next one."""
        if not name:
            return None
        if within:
            pair = self.numbers(name)
            number = pair[1] if pair is not None and pair[0] == within[0] else None
        else:
            number = self.number(name)
        if number is None:
            raise BadRequest(
                tr(
                    "{after!r} is not an id of this list; give the last id of the page "
                    "before, such as {example}",
                    after=name[:80],
                    example=self.of(*within, 12),
                ),
                param="after",
            )
        return number


FILE = Prefix("file-", deferred("No file {name!r} of yours; GET /v1/files lists them"))
JOB = Prefix(
    "ftjob-",
    deferred("No fine-tuning job {name!r} of yours; GET /v1/fine_tuning/jobs lists them"),
)
EVENT, CHECKPOINT = Prefix("ftevent-"), Prefix("ftckpt-")
EVAL = Prefix("eval_", deferred("No eval {name!r} of yours; GET /v1/evals lists them"))
EVAL_RUN = Prefix("evalrun_", deferred("No run {name!r} of this eval; GET …/runs lists them"))
OUTPUT_ITEM = Prefix("outputitem_", deferred("No output item {name!r} in this run"))
CHECKPOINT_STEP = Prefix("ckpt-step-")  # after a model's name: one of its checkpoints


def model_id(job: Job) -> str:
    return f"ft:{job.base_model}:{job.owner.username}:{job.suffix or ''}:{JOB.of(job.id)}"


def checkpoint_model_id(job: Job, step: int) -> str:
    return f"{model_id(job)}:{CHECKPOINT_STEP.of(step)}"


@dataclass(frozen=True)
class ModelRef:
    """A fine-tuned model's name, read: its job, and a checkpoint's step if it names one."""

    job_id: int
    checkpoint_step: int | None

    def matches(self, job: Job, name: str) -> bool:
        if self.checkpoint_step is None:
            return model_id(job) == name
        return checkpoint_model_id(job, self.checkpoint_step) == name


def parse_model_id(name: str) -> ModelRef | None:
    """The job (and checkpoint) an `ft:` name points to; None for any other name."""
    if not name.startswith("ft:"):
        return None
    parts = name.split(":")
    step = CHECKPOINT_STEP.number(parts[-1])
    job_part = parts[-2] if step is not None else parts[-1]
    job = JOB.number(job_part)
    return ModelRef(job, step) if job is not None else None
