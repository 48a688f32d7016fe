"""What a worker needs of the process it runs in, and nothing more."""

from collections.abc import Callable
from dataclasses import dataclass

from app.core.config import Settings
from app.core.storage import Storage
from app.db.session import Database
from app.ml.device import DevicePlan
from app.ml.environment import TorchEnvironment


@dataclass(frozen=True)
class WorkerContext:
    settings: Settings
    database: Database
    storage: Storage
    device_plan: DevicePlan  # this machine's: what the local executor's runs train on
    torch_environment: TorchEnvironment  # set in a run before it imports torch
    # The API's cached models give way to a training run on this machine's device.
    free_device_for_training: Callable[[], None]
    # A job's model is ready to serve (the API may load it now); called off the worker's
    # thread of jobs, so that the next job need not wait.
    model_ready: Callable[[int], None] = lambda job_id: None
