"""What one training run is asked to do. No torch here: the API process builds it."""

from dataclasses import dataclass, field
from pathlib import Path

from app.graders.sandbox.runner import SandboxLimits
from app.graders.spec import AnyGrader
from app.ml.device import DevicePlan
from app.ml.hyperparameters import HyperparameterRequest, ResolvedHyperparameters
from app.ml.pairs import QAPair
from app.ml.training.judges import JudgeModel


@dataclass(frozen=True)
class Replica:
    """This process's place in a data-parallel group."""

    rank: int
    world: int
    address: str  # tcp://host:port where rank 0 meets the others


@dataclass(frozen=True)
class StartAdapter:
    """Fine-tuning a fine-tuned model: the adapter weights to start from."""

    path: Path  # the job's own copy of them
    model: str  # the model's name, for the lineage


@dataclass(frozen=True)
class TrainingRequest:
    base_model: str
    pairs: list[QAPair]
    output_dir: Path
    model_cache_dir: Path
    hyperparameters: HyperparameterRequest
    device_plan: DevicePlan
    offline: bool = False
    resolved: ResolvedHyperparameters | None = None  # a resumed job's first resolution
    configured_models: tuple[str, ...] = ()  # QATUNE_BASE_MODELS: local entries allowed
    checkpoint_dir: Path | None = None  # where to keep checkpoints; None: none are saved
    resume_from: Path | None = None  # a checkpoint to continue from
    start: StartAdapter | None = None  # a trained adapter to train further (else a new one)
    validation_pairs: list[QAPair] = field(default_factory=list)  # given: no split is made
    cpu_threads: int | None = None  # None: the cores other programs leave free (CpuShare)
    adapter_name: str | None = None  # the folder name users unpack it as (model card)
    replica: Replica | None = None  # a helper of a data-parallel run (rank 0 starts them)
    # The base model's answer-table answers kept across this owner's jobs; None: not kept.
    base_answers_dir: Path | None = None
    # Reinforcement: the grader that scores sampled answers; None: another method
    grader: AnyGrader | None = None
    python_graders: SandboxLimits | None = None  # python graders' limits; None: they are off
    judges: tuple[JudgeModel, ...] = ()  # the grader's judge models, resolved for the owner
    # Training a fine-tuned model further: the answers it was trained on, kept (replayed
    # beside this job's examples) and counted after training
    keep_pairs: list[QAPair] = field(default_factory=list)
