"""/v1/evals: OpenAI's Evals API over qatune's evals service and its runner.

An eval holds its item schema and testing criteria; a run samples a model (any model you
may use here) on the items, or takes answers given in the data, and grades them; its
output items say, per item, what was asked, what was answered and each criterion's score.
`report_url` is the run's page in the admin UI.
"""

from typing import Annotated, Any, Literal

from fastapi import APIRouter, File, Form, Query, Request, UploadFile
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.orm import Session

from app.api.deps import CurrentUser, DatasetsDep, EvalsDep, SessionDep
from app.api.openai.files import to_file
from app.api.openapi import errors
from app.api.routes.datasets import read_limited
from app.core.language import text_of
from app.db.models import Eval, EvalOutputItem, EvalRun, User
from app.graders.evals import FileId
from app.graders.run_status import RunStatus
from app.schemas.openai.common import CursorPage, ListQuery
from app.schemas.openai.evals import (
    ApiError,
    CriterionCountsOut,
    DataSourceConfigOut,
    EvalCreate,
    EvalDeleted,
    EvalObject,
    EvalUpdate,
    OutputItem,
    PromptfooImport,
    ResultCounts,
    ResultOut,
    RunCreate,
    RunDeleted,
    RunObject,
    RunSourceDraft,
    SampleOut,
    UnmappedAssert,
    Usage,
)
from app.services import openai_ids
from app.services.evals import lifecycle as evals_service

router = APIRouter(prefix="/evals")
Page = Annotated[ListQuery, Query()]
SAMPLE_SCHEMA = {
    "type": "object",
    "properties": {"output_text": {"type": "string"}, "output_json": {"type": "object"}},
}


def to_eval(found: Eval) -> EvalObject:
    config = found.data_source_config
    properties: dict[str, Any] = {"item": config.item_schema}
    if config.include_sample_schema:
        properties["sample"] = SAMPLE_SCHEMA
    schema = {"type": "object", "properties": properties, "required": list(properties)}
    return EvalObject(
        id=openai_ids.EVAL.of(found.id),
        name=found.name,
        created_at=int(found.created_at.timestamp()),
        data_source_config=DataSourceConfigOut(schema_=schema),
        testing_criteria=found.testing_criteria,
        metadata=found.labels,
    )


def to_run(run: EvalRun, base_url: str) -> RunObject:
    counts = run.counts
    eval_name, run_name = openai_ids.EVAL.of(run.eval_id), openai_ids.EVAL_RUN.of(run.id)
    return RunObject(
        id=run_name,
        eval_id=eval_name,
        name=run.name,
        created_at=int(run.created_at.timestamp()),
        status=run.status,
        model=run.model,
        data_source=run.data_source,
        error=ApiError(code="run_failed", message=run.error_text() or "") if run.error else None,
        metadata=run.labels,
        result_counts=ResultCounts(
            total=counts.total, errored=counts.errored, failed=counts.failed, passed=counts.passed
        ),
        per_testing_criteria_results=[
            CriterionCountsOut(**c.model_dump()) for c in counts.per_criterion
        ],
        per_model_usage=counts.per_model,
        report_url=f"{base_url}ui/#/evals/{eval_name}/runs/{run_name}",
    )


def to_output_item(item: EvalOutputItem, run: EvalRun) -> OutputItem:
    sample = item.sample
    return OutputItem(
        id=openai_ids.OUTPUT_ITEM.of(item.id),
        eval_id=openai_ids.EVAL.of(run.eval_id),
        run_id=openai_ids.EVAL_RUN.of(run.id),
        created_at=int(item.created_at.timestamp()),
        status=item.status,
        datasource_item_id=item.position,
        datasource_item=item.item,
        results=[ResultOut(**result.model_dump()) for result in item.results],
        sample=SampleOut(
            input=sample.input,
            output=sample.output,
            finish_reason=sample.finish_reason,
            model=sample.model,
            usage=Usage(
                prompt_tokens=sample.prompt_tokens,
                completion_tokens=sample.completion_tokens,
                total_tokens=sample.prompt_tokens + sample.completion_tokens,
            ),
            error=ApiError(code="sample_failed", message=text_of(sample.error))
            if sample.error
            else None,
            seed=sample.seed,
            temperature=sample.temperature,
            top_p=sample.top_p,
            max_completion_tokens=sample.max_completion_tokens,
        ),
    )


# --------------------------------------------------------------------------- evals
@router.post("", response_model=EvalObject, responses=errors(400))
def create_eval(
    body: EvalCreate, user: CurrentUser, session: SessionDep, evals: EvalsDep
) -> EvalObject:
    """An eval: the items' schema and the criteria each answer is graded by."""
    made = evals.create(
        session,
        user,
        name=body.name,
        config=body.data_source_config,
        criteria=body.testing_criteria,
        labels=body.metadata,
    )
    return to_eval(made)


@router.post("/promptfoo", responses=errors(400, 413))
async def import_promptfoo(
    user: CurrentUser,
    session: SessionDep,
    evals: EvalsDep,
    datasets: DatasetsDep,
    file: Annotated[
        UploadFile, File(description="promptfooconfig.yaml (or .json), or a list of tests")
    ],
    judge: Annotated[
        str | None,
        Form(max_length=512, description="the model that grades llm-rubric asserts"),
    ] = None,
) -> PromptfooImport:
    """A qatune extension: a Promptfoo suite as an eval. Its tests become the items of a new
    `evals` file, their asserts the eval's criteria (each assert with no grader here named
    in `unmapped`), and each prompt a run's `data_source`: add `model` and start a run."""
    content = await read_limited(file, datasets.max_upload_bytes)
    made, items, suite = await run_in_threadpool(
        evals.import_promptfoo,
        session,
        user,
        content,
        file.filename,
        judge or None,  # an empty field: none given
    )
    source = FileId(type="file_id", id=openai_ids.FILE.of(items.id))
    return PromptfooImport(
        eval=to_eval(made),
        file=to_file(items),
        data_sources=[RunSourceDraft(source=source, input_messages=p) for p in suite.prompts],
        unmapped=[
            UnmappedAssert(test=u.test, type=u.assert_type, why=u.why) for u in suite.unmapped
        ],
    )


@router.get("", responses=errors(400, 404))
def list_evals(
    user: CurrentUser,
    session: SessionDep,
    page: Page,
) -> CursorPage[EvalObject]:
    found, more = evals_service.page_evals(session, user=user, page=page)
    return CursorPage.of([to_eval(e) for e in found], more)


@router.get("/{eval_id}", responses=errors(404))
def retrieve_eval(eval_id: str, user: CurrentUser, session: SessionDep) -> EvalObject:
    return to_eval(evals_service.get_eval(session, user=user, name=eval_id))


@router.post("/{eval_id}", responses=errors(400, 404))
def update_eval(
    eval_id: str, body: EvalUpdate, user: CurrentUser, session: SessionDep
) -> EvalObject:
    """Rename it, or replace its metadata."""
    changed = evals_service.update_eval(
        session, user=user, name=eval_id, new_name=body.name, labels=body.metadata
    )
    return to_eval(changed)


@router.delete("/{eval_id}", responses=errors(404, 409))
def delete_eval(eval_id: str, user: CurrentUser, session: SessionDep) -> EvalDeleted:
    """The eval with its runs and their items (a run still going: cancel it first)."""
    evals_service.delete_eval(session, user=user, name=eval_id)
    return EvalDeleted(eval_id=eval_id)


# ---------------------------------------------------------------------------- runs
@router.post("/{eval_id}/runs", response_model=RunObject, responses=errors(400, 404))
async def create_run(
    eval_id: str,
    body: RunCreate,
    http: Request,
    user: CurrentUser,
    session: SessionDep,
    evals: EvalsDep,
) -> RunObject:
    """Start a run: the model answers the items (`completions`), or the answers are in the
    data (`jsonl`); every answer is graded by the eval's criteria as it comes."""

    def make() -> tuple[int, RunObject]:
        evaluation = evals_service.get_eval(session, user=user, name=eval_id)
        run = evals.create_run(
            session,
            user,
            evaluation,
            name=body.name,
            data_source=body.data_source,
            labels=body.metadata,
        )
        session.commit()
        return run.id, to_run(run, str(http.base_url))

    run_id, made = await run_in_threadpool(make)
    evals.start([run_id])
    return made


def _run(session: Session, user: User, eval_id: str, run_id: str) -> EvalRun:
    evaluation = evals_service.get_eval(session, user=user, name=eval_id)
    return evals_service.get_run(session, user=user, evaluation=evaluation, name=run_id)


@router.get("/{eval_id}/runs", responses=errors(400, 404))
def list_runs(
    eval_id: str,
    http: Request,
    user: CurrentUser,
    session: SessionDep,
    page: Page,
    status: Annotated[RunStatus | None, Query()] = None,
) -> CursorPage[RunObject]:
    evaluation = evals_service.get_eval(session, user=user, name=eval_id)
    found, more = evals_service.page_runs(
        session, user=user, evaluation=evaluation, page=page, status=status
    )
    return CursorPage.of([to_run(r, str(http.base_url)) for r in found], more)


@router.get("/{eval_id}/runs/{run_id}", responses=errors(404))
def retrieve_run(
    eval_id: str, run_id: str, http: Request, user: CurrentUser, session: SessionDep
) -> RunObject:
    return to_run(_run(session, user, eval_id, run_id), str(http.base_url))


@router.post("/{eval_id}/runs/{run_id}/cancel", responses=errors(404))
@router.post("/{eval_id}/runs/{run_id}", responses=errors(404), include_in_schema=False)
def cancel_run(
    eval_id: str,
    run_id: str,
    http: Request,
    user: CurrentUser,
    session: SessionDep,
    evals: EvalsDep,
) -> RunObject:
    """Cancel a run still going (OpenAI's reference posts to the run itself, its client to
    …/cancel: both are taken); the items graded so far stay, its work stops at once."""
    run = evals.cancel(session, _run(session, user, eval_id, run_id))
    return to_run(run, str(http.base_url))


@router.delete("/{eval_id}/runs/{run_id}", responses=errors(404, 409))
def delete_run(eval_id: str, run_id: str, user: CurrentUser, session: SessionDep) -> RunDeleted:
    evals_service.delete_run(session, _run(session, user, eval_id, run_id))
    return RunDeleted(run_id=run_id)


@router.get("/{eval_id}/runs/{run_id}/output_items", responses=errors(400, 404))
def list_output_items(
    eval_id: str,
    run_id: str,
    user: CurrentUser,
    session: SessionDep,
    page: Page,
    status: Annotated[Literal["pass", "fail", "error"] | None, Query()] = None,
) -> CursorPage[OutputItem]:
    run = _run(session, user, eval_id, run_id)
    found, more = evals_service.page_output_items(session, run=run, page=page, status=status)
    return CursorPage.of([to_output_item(i, run) for i in found], more)


@router.get("/{eval_id}/runs/{run_id}/output_items/{item_id}", responses=errors(404))
def retrieve_output_item(
    eval_id: str, run_id: str, item_id: str, user: CurrentUser, session: SessionDep
) -> OutputItem:
    run = _run(session, user, eval_id, run_id)
    return to_output_item(evals_service.get_output_item(session, run=run, name=item_id), run)
