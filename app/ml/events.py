"""What a training run reports, as typed values.

The trainer emits `TrainingEvent`s; the worker relays them (over a pipe or through Ray);
the job state machine (services/jobs/lifecycle.py) folds each into the job by its type, and stores
its `data` as the event's JSON, where clients read it by `kind`.
"""

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.core.language import Sentence
from app.ml.hyperparameters import ResolvedHyperparameters
from app.ml.memory import MemorySnapshot
from app.ml.planner import MemoryPlan

Level = Literal["DEBUG", "INFO", "WARNING", "ERROR"]


# What a run is asked to do between two micro-batches: cancel (stop now, save nothing) or
# pause (stop at a checkpoint). The worker asks, the loop obeys, data-parallel ranks agree.
StopRequest = Literal["cancel", "pause"]


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True)


class MemoryReport(_Data):
    kind: Literal["memory"] = "memory"
    when: Literal["before", "after"]
    memory: MemorySnapshot


class DeviceChosen(_Data):
    kind: Literal["device"] = "device"
    device: str
    dtype: str
    reasons: list[str]


class Planned(_Data):
    kind: Literal["plan"] = "plan"
    hyperparameters: ResolvedHyperparameters
    plan: MemoryPlan


class Started(_Data):
    kind: Literal["start"] = "start"
    total_steps: int
    examples: int


class Progress(_Data):
    kind: Literal["progress"] = "progress"
    step: int
    total_steps: int  # auto epochs: the expected end, held so the share shown never falls
    epoch: float
    expected_epochs: float | None = None  # auto epochs: about how many the run will take
    loss: float
    learning_rate: float
    tokens_per_second: float
    eta_seconds: float
    memory: MemorySnapshot
    # DPO: the step's mean β·margin of the preferred over the non-preferred answer, and the
    # share of pairs with a positive one
    reward_margin: float | None = None
    reward_accuracy: float | None = None
    # Reinforcement: the step's mean reward, the mean spread of rewards within a prompt's
    # group, and the KL to the reference per answer token
    reward_mean: float | None = None
    reward_std: float | None = None
    kl: float | None = None


class Checkpointed(_Data):
    kind: Literal["checkpoint"] = "checkpoint"
    step: int
    train_loss: float | None


class Resumed(_Data):
    kind: Literal["resumed"] = "resumed"
    step: int
    total_steps: int


class Validated(_Data):
    """At the end of an epoch, with validation pairs: how the weights do on them (greedy
    exact answers, from one forward pass), and whether they are the best so far."""

    kind: Literal["validated"] = "validated"
    epoch: float
    step: int
    exact: int
    examples: int
    loss: float
    best: bool


class Evaluated(_Data):
    """The saved weights on the validation split, after training."""

    kind: Literal["eval"] = "eval"
    eval_loss: float
    eval_exact_match: float
    eval_examples: int
    base_exact_match: float | None = None  # the base model alone, on the same questions
    kept_epoch: float | None = None  # the epoch whose weights were kept (best validation)


class KnowledgeKept(_Data):
    """The forgetting meter (training/keeping.py): of the general questions the model
    answered right before training, how many it still does. `epoch` set: the cheap
    per-epoch reading (the share of its own earlier answers' tokens it still predicts);
    not set: the greedy answers after training."""

    kind: Literal["kept"] = "kept"
    known: int
    kept: int | None = None  # after training
    agreement: float | None = None  # each epoch
    epoch: float | None = None
    # True: of the answers the model it started from was trained on (a model trained
    # further), not of the general questions
    answers: bool = False


class RewardEvaluated(_Data):
    """Reinforcement, every eval_interval steps: the mean reward on the validation prompts."""

    kind: Literal["reward_eval"] = "reward_eval"
    step: int
    reward_mean: float
    prompts: int
    samples: int  # per prompt
    errors: int  # answers the grader could not score


class Learned(_Data):
    """At the end of an epoch: how many training answers greedy decoding would get exactly
    (every answer token the most likely one, as last seen in training)."""

    kind: Literal["learned"] = "learned"
    epoch: int
    learned: int
    examples: int
    token_accuracy: float  # of the answers' tokens, this epoch
    settling: bool  # the learning rate is decaying to zero: training ends soon
    final: bool = False  # the count of the weights the run ends with (one eval pass)
    kept_epoch: float | None = None  # final: the earlier epoch whose weights it ends with
    # Question noise: `learned` counts the questions with words dropped; these, the answers
    # the weights as they are give to the questions as written, and how many of those
    # missed are trained again in the next epoch (judging.py)
    written: int | None = None
    drilled: int = 0


class OutOfMemory(_Data):
    kind: Literal["oom"] = "oom"
    retry: int
    micro_batch_tokens: int
    memory: MemorySnapshot


class Note(_Data):
    """Something worth knowing that changes nothing in the job (model, packing, saved...)."""

    kind: Literal["note"] = "note"
    topic: str
    values: dict[str, int | float | str | bool] = Field(default_factory=dict)


class WorkerMemory(_Data):
    """The supervising worker's own memory, cleaned before and after each job."""

    kind: Literal["worker_memory"] = "worker_memory"
    when: Literal["before", "after"]
    before: MemorySnapshot
    after: MemorySnapshot


class StatusChanged(_Data):
    kind: Literal["status"] = "status"
    status: str


EventData = Annotated[
    MemoryReport
    | DeviceChosen
    | Planned
    | Started
    | Progress
    | Checkpointed
    | Resumed
    | Validated
    | Evaluated
    | RewardEvaluated
    | KnowledgeKept
    | Learned
    | OutOfMemory
    | Note
    | WorkerMemory
    | StatusChanged,
    Field(discriminator="kind"),
]


@dataclass(frozen=True)
class TrainingEvent:
    level: Level
    # Kept as a template and its values: a job's log is read in its reader's language.
    message: Sentence
    data: EventData | None = None
