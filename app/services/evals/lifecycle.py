"""Evals and their runs for a user: create, read, change, delete; what a run reads.

An eval is checked once when it is made (each criterion as a grader the user can run,
each template against the item schema); a run is checked when it is made (its model, its
data, its templates) and then carried out by services/evals/runs.py.
"""

import json
from collections.abc import Sequence
from pathlib import PurePath
from typing import Any, TypeVar

from sqlalchemy import Select, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from app.core import text_files
from app.core.errors import BadRequest, ConflictError, NotFoundError
from app.core.language import Sentence, tr
from app.core.storage import Storage
from app.db.base import utcnow
from app.db.models import Dataset, Eval, EvalOutputItem, EvalRun, User
from app.db.paging import cursor_page
from app.graders import promptfoo, run_status, templates
from app.graders.evals import (
    CompletionsSource,
    Criterion,
    CustomDataSourceConfig,
    FileContent,
    JsonlSource,
    Row,
    RunCounts,
    TemplateMessages,
)
from app.graders.run_status import RunAction, RunStatus
from app.graders.spec import template_strings
from app.schemas.openai.common import ListQuery
from app.services import openai_ids
from app.services.datasets import files as datasets_service
from app.services.evals.files import records_of, row_of
from app.services.evals.graders import Graders

UNFINISHED = tuple(run_status.UNFINISHED)
MAX_ROWS = 10_000
Listed = TypeVar("Listed", Eval, EvalRun, EvalOutputItem)


# -------------------------------------------------------------------------- evals
def create_eval(
    session: Session,
    *,
    user: User,
    graders: Graders,
    name: str | None,
    config: CustomDataSourceConfig,
    criteria: Sequence[Criterion],
    labels: dict[str, str] | None,
) -> Eval:
    names = [criterion.name for criterion in criteria]
    for index, criterion in enumerate(criteria):
        where = f"testing_criteria.{index}"
        if names.index(criterion.name) != index:
            raise BadRequest(
                tr(
                    "Two testing criteria are named {criterion_name!r}: results are reported "
                    "by name, so give each its own",
                    criterion_name=criterion.name,
                ),
                param=f"{where}.name",
            )
        graders.prepare(session, user, criterion, where)
        _check_items_have(config, template_strings(criterion), where)
    made = Eval(
        owner_id=user.id,
        name=name or "eval",
        data_source_config=config,
        testing_criteria=list(criteria),
        labels=labels,
    )
    session.add(made)
    session.flush()
    return made


def import_promptfoo(
    session: Session,
    *,
    user: User,
    graders: Graders,
    storage: Storage,
    content: bytes,
    filename: str | None,
    judge: str | None,
) -> tuple[Eval, Dataset, promptfoo.PromptfooSuite]:
    """A Promptfoo suite as an eval (its asserts as criteria) and a file of its tests as the
    eval's items (`purpose` evals), made together or not at all. The suite's prompts become
    the messages a run asks (app/graders/promptfoo.py says what maps to what)."""
    try:
        suite = promptfoo.convert(promptfoo.read(content), judge=judge)
    except (promptfoo.PromptfooInvalid, text_files.NotText) as exc:
        raise BadRequest(str(exc), param="file") from exc
    made = create_eval(
        session,
        user=user,
        graders=graders,
        name=suite.name,
        config=suite.config,
        criteria=suite.criteria,
        labels={"imported_from": "promptfoo"},
    )
    lines = "".join(json.dumps({"item": item}, ensure_ascii=False) + "\n" for item in suite.items)
    stem = PurePath(filename or "promptfoo").stem or "promptfoo"
    items = datasets_service.create_dataset(
        session,
        owner=user,
        storage=storage,
        content=lines.encode(),
        filename=f"{stem}.items.jsonl",
        name=None,
        max_rows=promptfoo.MAX_TESTS,
        purpose=datasets_service.EVALS,
    )
    return made, items, suite


def _check_items_have(config: CustomDataSourceConfig, texts: list[str], where: str) -> None:
    """A template that names an item field the schema says items do not have is refused."""
    fields = config.item_fields()
    if fields is None:
        return
    for text in texts:
        for variable in templates.variables(text):
            if variable.namespace == "item" and variable.path and variable.path[0] not in fields:
                raise BadRequest(
                    tr(
                        "{{{{ {text} }}}} names the item field {variable_path!r}, which the "
                        "item schema does not have (it has {fields})",
                        text=variable.text,
                        variable_path=variable.path[0],
                        fields=", ".join(sorted(fields)) or tr("none"),
                    ),
                    param=where,
                )


def visible_evals(user: User) -> Select[Eval]:
    query = select(Eval)
    return query if user.is_admin else query.where(Eval.owner_id == user.id)


def get_eval(session: Session, *, user: User, name: str) -> Eval:
    return openai_ids.EVAL.find(
        name, lambda number: session.scalar(visible_evals(user).where(Eval.id == number))
    )


def page_evals(session: Session, *, user: User, page: ListQuery) -> tuple[list[Eval], bool]:
    return _page(session, visible_evals(user), Eval.id, openai_ids.EVAL, page)


def update_eval(
    session: Session, *, user: User, name: str, new_name: str | None, labels: dict[str, str] | None
) -> Eval:
    found = get_eval(session, user=user, name=name)
    if new_name is not None:
        found.name = new_name
    if labels is not None:
        found.labels = labels
    session.flush()
    return found


def delete_eval(session: Session, *, user: User, name: str) -> Eval:
    found = get_eval(session, user=user, name=name)
    running = session.scalar(
        select(EvalRun.id).where(EvalRun.eval_id == found.id, EvalRun.status.in_(UNFINISHED))
    )
    if running is not None:
        run = openai_ids.EVAL_RUN.of(running)
        raise ConflictError(tr("Run {run} of this eval is still going: cancel it first", run=run))
    session.delete(found)
    session.flush()
    return found


# -------------------------------------------------------------------------- runs
def create_run(
    session: Session,
    *,
    user: User,
    storage: Storage,
    graders: Graders,
    evaluation: Eval,
    name: str | None,
    data_source: CompletionsSource | JsonlSource,
    labels: dict[str, str] | None,
    serving_resolve: Any,
) -> EvalRun:
    rows = read_rows(session, user=user, storage=storage, data_source=data_source)
    model = None
    if isinstance(data_source, CompletionsSource):
        try:
            model = serving_resolve(session, user, data_source.model).name
        except NotFoundError as exc:
            raise BadRequest(
                tr(
                    "The model {data_source_model!r} does not exist or is not yours: GET "
                    "/v1/models lists the models you can use",
                    data_source_model=data_source.model[:200],
                ),
                param="data_source.model",
            ) from exc
        messages = data_source.input_messages
        if isinstance(messages, TemplateMessages):
            texts = [message.text for message in messages.template]
            _check_items_have(evaluation.data_source_config, texts, "data_source.input_messages")
    criteria = evaluation.testing_criteria  # still runnable: python on, judges still there
    graders.prepare_all(
        session, user, [(c, f"testing_criteria.{i}") for i, c in enumerate(criteria)]
    )
    run = EvalRun(
        eval_id=evaluation.id,
        owner_id=user.id,
        name=name or f"run on {model or 'given answers'}",
        status=RunStatus.QUEUED,
        model=model,
        data_source=data_source,
        labels=labels,
        counts=RunCounts(total=len(rows)),
    )
    session.add(run)
    session.flush()
    return run


def read_rows(
    session: Session, *, user: User, storage: Storage, data_source: CompletionsSource | JsonlSource
) -> list[Row]:
    """The run's items: given inline, or the records of one of the user's files (each
    record's `item`, or the record itself)."""
    source = data_source.source
    if isinstance(source, FileContent):
        return list(source.content)
    number = openai_ids.FILE.number(source.id)
    try:
        if number is None:
            raise NotFoundError(tr("not a file id"))
        dataset = datasets_service.get_dataset(session, user=user, dataset_id=number)
    except NotFoundError as exc:
        raise BadRequest(
            tr(
                "No file {source_id!r} of yours: GET /v1/files lists them", source_id=source.id[:80]
            ),
            param="data_source.source.id",
        ) from exc
    records = records_of(datasets_service.original_content(storage, dataset))
    if records is None:  # a CSV of pairs: its pairs
        pairs = datasets_service.read_pairs(storage, dataset)
        records = [{"question": pair.question, "answer": pair.answer} for pair in pairs]
    rows = []
    for record in records[:MAX_ROWS]:
        row = row_of(record)
        if isinstance(row, str):
            raise BadRequest(
                tr(
                    "File {source_id} holds a record that {problem}",
                    source_id=source.id,
                    problem=row,
                ),  # fmt: skip
                param="data_source.source.id",
            )
        rows.append(row)
    return rows


def visible_runs(user: User) -> Select[EvalRun]:
    query = select(EvalRun)
    return query if user.is_admin else query.where(EvalRun.owner_id == user.id)


def get_run(session: Session, *, user: User, evaluation: Eval, name: str) -> EvalRun:
    runs = visible_runs(user).where(EvalRun.eval_id == evaluation.id)
    return openai_ids.EVAL_RUN.find(
        name, lambda number: session.scalar(runs.where(EvalRun.id == number))
    )


def page_runs(
    session: Session,
    *,
    user: User,
    evaluation: Eval,
    page: ListQuery,
    status: str | None,
) -> tuple[list[EvalRun], bool]:
    query = visible_runs(user).where(EvalRun.eval_id == evaluation.id)
    if status is not None:
        query = query.where(EvalRun.status == status)
    return _page(session, query, EvalRun.id, openai_ids.EVAL_RUN, page)


def transition(run: EvalRun, target: RunStatus, error: Sentence | None = None) -> None:
    """The one way a run's status changes (run_status.py's table), with what goes with it."""
    moved = run_status.move(run.status, target, now=utcnow())
    run.status = moved.status
    if moved.finished_at is not None:
        run.finished_at = moved.finished_at
    if error is not None:
        run.error, run.error_said = error.english(), error


def cancel_run(session: Session, run: EvalRun) -> EvalRun:
    """A run not yet finished ends as canceled (its runner stops at once: runs.py)."""
    if run.status in UNFINISHED:
        transition(run, RunStatus.CANCELED)
        session.flush()
    return run


def delete_run(session: Session, run: EvalRun) -> None:
    if RunAction.DELETE not in run_status.actions(run):
        raise ConflictError(tr("The run is still going: cancel it first"))
    session.delete(run)
    session.flush()


def page_output_items(
    session: Session,
    *,
    run: EvalRun,
    page: ListQuery,
    status: str | None,
) -> tuple[list[EvalOutputItem], bool]:
    query = select(EvalOutputItem).where(EvalOutputItem.run_id == run.id)
    if status is not None:
        query = query.where(EvalOutputItem.status == status)
    return _page(session, query, EvalOutputItem.id, openai_ids.OUTPUT_ITEM, page)


def _page(
    session: Session,
    query: Select[Listed],
    key: InstrumentedAttribute[int],
    names: openai_ids.Prefix,
    page: ListQuery,
) -> tuple[list[Listed], bool]:
    """One page of a list, after the id the client names: read as a number, not looked up,
    so that one deleted since it was listed still marks where the next page starts."""
    after = names.after(page.after)
    return cursor_page(
        session, query, key, after=after, limit=page.limit, newest_first=page.newest_first
    )


def get_output_item(session: Session, *, run: EvalRun, name: str) -> EvalOutputItem:
    items = select(EvalOutputItem).where(EvalOutputItem.run_id == run.id)
    return openai_ids.OUTPUT_ITEM.find(
        name, lambda number: session.scalar(items.where(EvalOutputItem.id == number))
    )
