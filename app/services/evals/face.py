"""What the routes do with evals that needs the storage, the graders, serving or the
runner, wired in once: /v1/evals, the Promptfoo import and a job's held-out evaluation make
and start runs through it."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.core.storage import Storage
from app.db.models import Dataset, Eval, EvalRun, Job, User
from app.graders.evals import CompletionsSource, Criterion, CustomDataSourceConfig, JsonlSource
from app.graders.promptfoo import PromptfooSuite
from app.services.evals import lifecycle
from app.services.evals.graders import Graders
from app.services.evals.runs import EvalRunner
from app.services.jobs import held_out


@dataclass(frozen=True)
class Evals:
    storage: Storage
    graders: Graders
    runner: EvalRunner

    def create(
        self,
        session: Session,
        user: User,
        *,
        name: str | None,
        config: CustomDataSourceConfig,
        criteria: Sequence[Criterion],
        labels: dict[str, str] | None,
    ) -> Eval:
        return lifecycle.create_eval(
            session,
            user=user,
            graders=self.graders,
            name=name,
            config=config,
            criteria=criteria,
            labels=labels,
        )

    def import_promptfoo(
        self, session: Session, user: User, content: bytes, filename: str | None, judge: str | None
    ) -> tuple[Eval, Dataset, PromptfooSuite]:
        return lifecycle.import_promptfoo(
            session,
            user=user,
            graders=self.graders,
            storage=self.storage,
            content=content,
            filename=filename,
            judge=judge,
        )

    def create_run(
        self,
        session: Session,
        user: User,
        evaluation: Eval,
        *,
        name: str | None,
        data_source: CompletionsSource | JsonlSource,
        labels: dict[str, str] | None,
    ) -> EvalRun:
        """Queued: `start` it once the session is committed."""
        return lifecycle.create_run(
            session,
            user=user,
            storage=self.storage,
            graders=self.graders,
            evaluation=evaluation,
            name=name,
            data_source=data_source,
            labels=labels,
            serving_resolve=self.graders.serving.resolve,
        )

    def evaluate_job(
        self,
        session: Session,
        user: User,
        job: Job,
        *,
        dataset_id: int,
        criteria: Sequence[str],
        compare_base: bool,
    ) -> tuple[Eval, list[EvalRun]]:
        """An eval of the job's model (and its base) on a held-out file of the user's:
        queued runs, to `start` once the session is committed."""
        served = self.graders.serving.job_model(job)  # no model: a 409 that says why
        return held_out.evaluate_job(
            session,
            user=user,
            storage=self.storage,
            graders=self.graders,
            serving_resolve=self.graders.serving.resolve,
            job_model=served.name,
            base_model=job.base_model if compare_base else None,
            dataset_id=dataset_id,
            criteria=[held_out.JOB_CRITERIA[name] for name in dict.fromkeys(criteria)],
            max_tokens=served.answer_budget,
        )

    def start(self, run_ids: Iterable[int]) -> None:
        """Carry the runs out in the background, on the running event loop."""
        for run_id in run_ids:
            self.runner.start(run_id)

    def cancel(self, session: Session, run: EvalRun) -> EvalRun:
        """Canceled in the database, and its work stopped now (sandboxes killed)."""
        lifecycle.cancel_run(session, run)
        self.runner.cancel(run.id)
        return run
