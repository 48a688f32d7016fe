"""qatune's things under the names OpenAI's API gives them, and back.

A file is a dataset (`file-12`), a fine-tuning job a job (`ftjob-7`), an eval
`eval_3` (its runs `evalrun_5`, their items `outputitem_9`), an event
`ftevent-7-31`, a checkpoint `ftckpt-7-40`. A trained model is
`ft:{base}:{owner}:{suffix}:ftjob-7`, one of its checkpoints the same with
`:ckpt-step-40` after it, as OpenAI names them. A name is read back only if it is exactly
the name of the job it points to, so a made-up owner or base does not reach anything.
"""

from dataclasses import dataclass

from app.db.models import Job

FILE, JOB, EVENT, CHECKPOINT = "file-", "ftjob-", "ftevent-", "ftckpt-"
EVAL, EVAL_RUN, OUTPUT_ITEM = "eval_", "evalrun_", "outputitem_"
CHECKPOINT_SUFFIX = "ckpt-step-"


def file_id(dataset_id: int) -> str:
    return f"{FILE}{dataset_id}"


def job_id(job_id: int) -> str:
    return f"{JOB}{job_id}"


def event_id(job_id: int, seq: int) -> str:
    return f"{EVENT}{job_id}-{seq}"


def checkpoint_id(job_id: int, step: int) -> str:
    return f"{CHECKPOINT}{job_id}-{step}"


def eval_id(number: int) -> str:
    return f"{EVAL}{number}"


def eval_run_id(number: int) -> str:
    return f"{EVAL_RUN}{number}"


def output_item_id(number: int) -> str:
    return f"{OUTPUT_ITEM}{number}"


def model_id(job: Job) -> str:
    return f"ft:{job.base_model}:{job.owner.username}:{job.suffix or ''}:{job_id(job.id)}"


def checkpoint_model_id(job: Job, step: int) -> str:
    return f"{model_id(job)}:{CHECKPOINT_SUFFIX}{step}"


def number_after(prefix: str, name: str) -> int | None:
    """The number in `prefix` + digits, or None if `name` is not such a name."""
    digits = name.removeprefix(prefix)
    if not name.startswith(prefix) or not digits.isdigit() or len(digits) > 18:
        return None
    return int(digits)


def numbers_after(prefix: str, name: str) -> tuple[int, int] | None:
    """(a, b) from `prefix` + a-b (events, checkpoints), or None."""
    first, _, second = name.removeprefix(prefix).partition("-")
    if not name.startswith(prefix) or not (first.isdigit() and second.isdigit()):
        return None
    if len(first) > 18 or len(second) > 18:
        return None
    return int(first), int(second)


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
    step = number_after(CHECKPOINT_SUFFIX, parts[-1])
    job_part = parts[-2] if step is not None else parts[-1]
    job = number_after(JOB, job_part)
    return ModelRef(job, step) if job is not None else None
