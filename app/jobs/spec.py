"""What a job's run is given: the trainer's request, and how to run it as this job.

The worker builds it from the job; the local executor pickles it to a training child, the
Ray executor to a node, which swaps the paths for its own (`dataclasses.replace`).
"""

from dataclasses import dataclass
from pathlib import Path

from app.ml.environment import TorchEnvironment
from app.ml.training.request import TrainingRequest


@dataclass(frozen=True)
class TrainingSpec:
    job_id: int
    request: TrainingRequest
    job_log: Path  # the job's own log file
    log_dir: Path  # the service's log directory
    torch_environment: TorchEnvironment  # set before the run imports torch
    niceness: int  # added to the run's: the API and the user's programs go first
