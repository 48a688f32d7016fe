"""What the routes do with jobs that needs more than a session, with the service's parts
wired in once: the native and the OpenAI routes create and estimate a job, and read its
trained model's files, through it."""

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.storage import Storage
from app.db.models import Job, User
from app.ml.device import DevicePlan
from app.ml.training.metrics import EvaluationReport
from app.schemas.jobs import EstimateTarget, JobCreate
from app.services.jobs import lifecycle, trained_models
from app.services.jobs.estimates import Estimate, estimate
from app.services.jobs.lifecycle import GraderCheck
from app.services.jobs.trained_models import CheckpointFile


@dataclass(frozen=True)
class Jobs:
    storage: Storage
    settings: Settings
    device_plan: DevicePlan
    graders: GraderCheck  # checks a reinforcement job's grader for its user

    def create(self, session: Session, user: User, request: JobCreate) -> Job:
        """The request checked (the model for this user, the data, the grader, that it fits
        here) and the job queued with its own copy of the pairs."""
        job = lifecycle.create_job(
            session,
            user=user,
            storage=self.storage,
            settings=self.settings,
            device_plan=self.device_plan,
            request=request,
            graders=self.graders,
        )
        # SQLite's write lock is held from the job's INSERT to the commit: committed here, in
        # this thread, not after a hop through a busy event loop and back.
        session.commit()
        return job

    def estimate(
        self, session: Session, user: User, request: JobCreate, target: EstimateTarget | None
    ) -> Estimate:
        """The memory plan for this job, here or on `target`."""
        return estimate(
            session,
            user=user,
            storage=self.storage,
            settings=self.settings,
            request=request,
            device_plan=self.device_plan,
            target=target,
        )

    def checkpoints(self, job: Job) -> list[CheckpointFile]:
        """Its checkpoints on disk, oldest first."""
        return trained_models.checkpoints(self.storage, job)

    def evaluation(self, job: Job) -> EvaluationReport:
        """The trained model's answers beside the expected ones and the base model's."""
        return trained_models.evaluation(self.storage, job)

    def adapter_dir(self, job: Job) -> Path:
        """The final adapter's directory (a 409 where the job has no model)."""
        return trained_models.servable_adapter(self.storage, job)[1]
