"""What the worker and a training run say to each other, as typed values.

The worker hands the run a `TrainingSpec`; the run sends back `TrainingEvent`s while it
trains and one `Outcome` at the end. The local executor carries them over a pipe to a
child process; everything here pickles.
"""

from dataclasses import dataclass
from pathlib import Path

from app.ml.device import DevicePlan
from app.ml.environment import TorchEnvironment
from app.ml.events import TrainingEvent
from app.ml.hyperparameters import HyperparameterRequest, ResolvedHyperparameters
from app.ml.training.metrics import TrainingMetrics


@dataclass(frozen=True)
class TrainingSpec:
    job_id: int
    base_model: str
    pairs_file: Path
    validation_file: Path | None  # a validation file given with the job, instead of a split
    output_dir: Path
    job_log: Path
    model_cache_dir: Path
    log_dir: Path
    hyperparameters: HyperparameterRequest
    resolved: ResolvedHyperparameters | None
    device_plan: DevicePlan
    offline: bool
    configured_models: tuple[str, ...]
    torch_environment: TorchEnvironment
    checkpoint_dir: Path
    resume_from: Path | None  # the job's newest checkpoint, if an earlier run left one
    niceness: int  # added to the child's: the API and the user's programs go first
    cpu_threads: int | None  # None: share the CPU with whatever else runs


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

    reason: str  # what happened and what to do, for the user


@dataclass(frozen=True)
class Interrupted:
    """The run died without saying why (killed, crashed): it may resume from a checkpoint."""

    reason: str  # what is known of how it ended


Reported = Succeeded | Cancelled | Paused | Failed  # how a run says it ended
Outcome = Reported | Interrupted
ChildMessage = TrainingEvent | Reported
