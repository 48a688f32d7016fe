"""Carrying out eval runs: sample the model on each item, grade every answer, save.

Runs go on in the API process, where the serving engine is: one asyncio task a run, items
a batch at a time (the engine decodes a batch's answers together; each answer's criteria
are graded at once). After each batch the results are saved, the run's counts with them,
and the run is read again: a run canceled meanwhile stops there. Before each batch the
models are resolved again, so a model or judge deleted mid-run fails the run with that
reason. A run that was going when the service stopped is failed when it starts again.
"""

import asyncio
from dataclasses import dataclass

from loguru import logger
from sqlalchemy import select

from app.core.errors import BadRequest, NotFoundError, QatuneError
from app.core.language import Sentence, said, verbatim
from app.core.storage import Storage
from app.db.models import Eval, EvalOutputItem, EvalRun, User
from app.db.session import Database
from app.graders.evals import (
    CompletionsSource,
    Criterion,
    CriterionCounts,
    CriterionResult,
    ItemReference,
    JsonlSource,
    ModelUsage,
    Row,
    RunCounts,
    SampleRecord,
    optional_reads,
    passed,
)
from app.graders.grading import ROLES, grade
from app.graders.results import Grade, Sample
from app.graders.run_status import RunStatus
from app.graders.templates import MissingVariable, render, value_of
from app.graders.tools import Tools
from app.ml.serving.requests import AskFailed
from app.services.evals import lifecycle as evals_service
from app.services.evals.graders import Graders
from app.services.serving.queries import Chat, Options, ServedModel, Serving

DEFAULT_MAX_TOKENS = 256  # an answer's tokens when the run's sampling_params do not say


@dataclass(frozen=True)
class RunPlan:
    """What a batch of a run needs, read from the database before it (no row is handed
    to the run's task: it reads again, in its own session, between batches)."""

    data_source: CompletionsSource | JsonlSource
    # each criterion with the optional item fields it reads (`optional_reads`)
    criteria: list[tuple[Criterion, frozenset[str]]]


@dataclass(frozen=True)
class ItemOutcome:
    position: int
    status: str  # pass, fail, error
    item: dict[str, object]
    sample: SampleRecord
    results: list[CriterionResult]
    grades: list[Grade]


# Items sampled, graded and saved together: the engine decodes them in one batch, and a
# run's counts (its progress bar) move every BATCH items, a cancel stopping within BATCH.
BATCH = 8


class EvalRunner:
    def __init__(self, database: Database, storage: Storage, graders: Graders) -> None:
        self.database = database
        self.storage = storage
        self.graders = graders
        self.serving: Serving = graders.serving
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._canceled: set[int] = set()  # runs a user canceled (not the service stopping)

    def recover(self) -> None:
        """Runs left going by a stopped service end as failed: say so, keep what was saved."""
        stopped = said("The service stopped during the run; start a new run")
        with self.database.session() as session:
            for run in session.scalars(
                select(EvalRun).where(EvalRun.status.in_(evals_service.UNFINISHED))
            ):
                evals_service.transition(run, RunStatus.FAILED, stopped)

    def start(self, run_id: int) -> None:
        """Carry the run out on this event loop."""
        task = asyncio.get_running_loop().create_task(self._run(run_id))
        self._tasks[run_id] = task
        task.add_done_callback(lambda _: self._tasks.pop(run_id, None))

    def cancel(self, run_id: int) -> None:
        """The run was canceled: stop it now, its answers and graders with it (a python
        grader's sandbox is killed), not at the end of its batch."""
        task = self._tasks.get(run_id)
        if task is not None:
            self._canceled.add(run_id)
            task.cancel()

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def wait(self, run_id: int) -> None:
        """For tests and shutdown: until the run's task has ended."""
        task = self._tasks.get(run_id)
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)

    # ------------------------------------------------------------------- a run
    async def _run(self, run_id: int) -> None:
        try:
            await self._carry_out(run_id)
        except asyncio.CancelledError:
            if run_id in self._canceled:  # its status says so already
                self._canceled.discard(run_id)
                return
            stopped = said("The service stopped during the run")
            await asyncio.to_thread(self._finish, run_id, RunStatus.FAILED, stopped)
            raise
        except QatuneError as exc:
            await asyncio.to_thread(self._finish, run_id, RunStatus.FAILED, exc.sentence)
        except Exception as exc:  # the run fails with the reason; the service goes on
            logger.exception("Eval run {} failed", run_id)
            why = verbatim(f"{type(exc).__name__}: {exc}")
            await asyncio.to_thread(self._finish, run_id, RunStatus.FAILED, why)

    async def _carry_out(self, run_id: int) -> None:
        rows = await asyncio.to_thread(self._rows, run_id)
        counts = RunCounts(total=len(rows))
        for start in range(0, len(rows), BATCH):
            prepared = await asyncio.to_thread(self._prepare, run_id)
            if prepared is None:
                return  # canceled
            served, tools, plan = prepared
            chunk = list(enumerate(rows[start : start + BATCH], start=start))
            outcomes = await asyncio.gather(
                *(self._item(plan, served, tools, position, row) for position, row in chunk)
            )
            _count(counts, plan, list(outcomes))
            if not await asyncio.to_thread(self._save, run_id, list(outcomes), counts):
                return  # canceled while this batch ran: its items are not kept
        await asyncio.to_thread(self._finish, run_id, RunStatus.COMPLETED, None)

    def _rows(self, run_id: int) -> list[Row]:
        with self.database.session() as session:
            run = session.get(EvalRun, run_id)
            assert run is not None
            user = session.get(User, run.owner_id)
            assert user is not None
            rows = evals_service.read_rows(
                session, user=user, storage=self.storage, data_source=run.data_source
            )
            evals_service.transition(run, RunStatus.IN_PROGRESS)
            return rows

    def _prepare(self, run_id: int) -> tuple[ServedModel | None, Tools, RunPlan] | None:
        """The run's models and judges as they are now; None if the run was canceled."""
        with self.database.session() as session:
            run = session.get(EvalRun, run_id)
            if run is None or run.status != RunStatus.IN_PROGRESS:
                return None
            user = session.get(User, run.owner_id)
            evaluation = session.get(Eval, run.eval_id)
            assert user is not None and evaluation is not None
            served = None
            if isinstance(run.data_source, CompletionsSource):
                try:
                    served = self.serving.resolve(session, user, run.data_source.model)
                except NotFoundError as exc:
                    raise BadRequest(
                        said(
                            "The model {data_source_model} was deleted during the run",
                            data_source_model=run.data_source.model,
                        )
                    ) from exc
            criteria = evaluation.testing_criteria
            places = [(c, f"testing_criteria.{i}") for i, c in enumerate(criteria)]
            try:
                tools = self.graders.prepare_all(session, user, places)
            except BadRequest as exc:
                raise BadRequest(
                    said(
                        "Stopped: {exc_param}: {exc_message}",
                        exc_param=exc.param or "",
                        exc_message=exc.sentence,
                    )
                ) from exc
            optional = evaluation.data_source_config.optional_fields()
            reads = [(c, optional_reads(c, optional)) for c in criteria]
            return served, tools, RunPlan(run.data_source, reads)

    async def _item(
        self, plan: RunPlan, served: ServedModel | None, tools: Tools, position: int, row: Row
    ) -> ItemOutcome:
        record = await self._sample(plan, served, row)
        if record.error is not None:
            return ItemOutcome(position, "error", row.item, record, [], [])
        sample = Sample.of_text(record.output_text)
        criteria = [c for c, reads in plan.criteria if reads.issubset(row.item)]
        grades = await asyncio.gather(*(grade(c, sample, row.item, tools) for c in criteria))
        results = [
            CriterionResult(
                name=g.name,
                type=g.type,
                score=g.reward,
                passed=passed(c, g) and not g.errors.any,
                error=g.explanation if g.errors.any else None,
                explanation=g.explanation,
            )
            for c, g in zip(criteria, grades, strict=True)
        ]
        if any(g.errors.any for g in grades):
            status = "error"
        else:
            status = "pass" if all(r.passed for r in results) else "fail"
        return ItemOutcome(position, status, row.item, record, results, list(grades))

    async def _sample(self, plan: RunPlan, served: ServedModel | None, row: Row) -> SampleRecord:
        source = plan.data_source
        if not isinstance(source, CompletionsSource):  # jsonl: the answer is in the row
            given = (row.sample or {}).get("output_text")
            if not isinstance(given, str):
                return SampleRecord(error=said("the row has no sample.output_text to grade"))
            return SampleRecord(output=[{"role": "assistant", "content": given}])
        assert served is not None
        sampling = source.sampling_params
        options = Options(
            max_tokens=(sampling.max_tokens if sampling else None) or DEFAULT_MAX_TOKENS,
            temperature=sampling.temperature
            if sampling and sampling.temperature is not None
            else 1.0,
            top_p=sampling.top_p if sampling and sampling.top_p is not None else 1.0,
            seed=sampling.seed if sampling else None,
        )
        record = SampleRecord(
            model=served.name,
            seed=options.seed,
            temperature=options.temperature,
            top_p=options.top_p,
            max_completion_tokens=options.max_tokens or 0,
        )
        try:
            messages = _messages(source, row)
        except (MissingVariable, ValueError) as exc:
            return record.model_copy(update={"error": verbatim(str(exc))})
        record = record.model_copy(update={"input": messages})
        return await asyncio.to_thread(self._answer, served, messages, options, record)

    def _answer(
        self,
        served: ServedModel,
        messages: list[dict[str, str]],
        options: Options,
        record: SampleRecord,
    ) -> SampleRecord:
        try:
            generation = self.serving.start(served, Chat(messages), options)
            (choice,) = generation.answer()
        except (QatuneError, AskFailed) as exc:
            why = exc.sentence if isinstance(exc, QatuneError) else verbatim(str(exc))
            failed = said("the model could not answer: {why}", why=why)
            return record.model_copy(update={"error": failed})
        assert choice.finished is not None
        return record.model_copy(
            update={
                "output": [{"role": "assistant", "content": choice.answer}],
                "finish_reason": choice.finished.reason.value,
                "prompt_tokens": generation.prompt_tokens,
                "completion_tokens": generation.completion_tokens,
            }
        )

    def _save(self, run_id: int, outcomes: list[ItemOutcome], counts: RunCounts) -> bool:
        with self.database.session() as session:
            run = session.get(EvalRun, run_id)
            if run is None or run.status != RunStatus.IN_PROGRESS:
                return False
            for outcome in outcomes:
                session.add(
                    EvalOutputItem(
                        run_id=run_id,
                        position=outcome.position,
                        status=outcome.status,
                        item=outcome.item,
                        sample=outcome.sample,
                        results=outcome.results,
                    )
                )
            run.counts = counts.model_copy(deep=True)
            return True

    def _finish(self, run_id: int, status: RunStatus, error: Sentence | None) -> None:
        with self.database.session() as session:
            run = session.get(EvalRun, run_id)
            if run is None or run.status not in evals_service.UNFINISHED:
                return
            evals_service.transition(run, status, error)
        if error:
            logger.warning("Eval run {} {}: {}", run_id, status, error.english())


def _messages(source: CompletionsSource, row: Row) -> list[dict[str, str]]:
    """The messages the model is asked, from the template or from the item itself."""
    namespaces = {"item": row.item}
    if isinstance(source.input_messages, ItemReference):
        found = value_of(source.input_messages.item_reference, namespaces)
        if not isinstance(found, list) or not all(
            isinstance(m, dict) and isinstance(m.get("content"), str) for m in found
        ):
            raise ValueError(f"{source.input_messages.item_reference} is not a list of messages")
        return [
            {
                "role": ROLES.get(m.get("role", "user"), m.get("role", "user")),
                "content": m["content"],
            }
            for m in found
        ]
    return [
        {"role": ROLES.get(m.role, m.role), "content": render(m.text, namespaces)}
        for m in source.input_messages.template
    ]


def _count(counts: RunCounts, plan: RunPlan, outcomes: list[ItemOutcome]) -> None:
    by_name = {c.testing_criteria: c for c in counts.per_criterion}
    usage = {u.model_name: u for u in counts.per_model}
    for criterion, _ in plan.criteria:
        by_name.setdefault(criterion.name, CriterionCounts(testing_criteria=criterion.name))
    for outcome in outcomes:
        setattr(counts, _COUNTED[outcome.status], getattr(counts, _COUNTED[outcome.status]) + 1)
        for result in outcome.results:
            tally = by_name[result.name]
            if result.passed:
                tally.passed += 1
            else:
                tally.failed += 1
        sample = outcome.sample
        if sample.model:
            model = usage.setdefault(sample.model, ModelUsage(model_name=sample.model))
            model.invocation_count += 1
            model.prompt_tokens += sample.prompt_tokens
            model.completion_tokens += sample.completion_tokens
            model.total_tokens += sample.prompt_tokens + sample.completion_tokens
        for grade_ in outcome.grades:
            for name, tokens in grade_.tokens_per_model.items():
                judge = usage.setdefault(name, ModelUsage(model_name=name))
                judge.invocation_count += 1
                judge.total_tokens += tokens
    counts.per_criterion = list(by_name.values())
    counts.per_model = list(usage.values())


_COUNTED = {"pass": "passed", "fail": "failed", "error": "errored"}
