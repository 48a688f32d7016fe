"""/v1/fine_tuning/alpha/graders/validate and /run: try a grader before a job or an eval
uses it. A grader OpenAI would refuse is a 400 naming the field (api/errors.py)."""

from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool

from app.api.client_gone import unless_client_leaves
from app.api.deps import CurrentUser, GradersDep, SessionDep
from app.api.errors import error_response
from app.api.openapi import errors
from app.schemas.openai.graders import (
    GraderRun,
    GraderRunCreate,
    GraderValidateCreate,
    GraderValidated,
)
from app.services.evals.graders import Tools

router = APIRouter(prefix="/fine_tuning/alpha/graders")


@router.post("/validate", response_model=GraderValidated, responses=errors(400))
async def validate_grader(
    body: GraderValidateCreate, user: CurrentUser, session: SessionDep, graders: GradersDep
) -> Any:
    """Check a grader as a job or an eval would, without running it."""
    await run_in_threadpool(graders.prepare, session, user, body.grader, "grader")
    return GraderValidated(grader=body.grader)


@router.post("/run", response_model=GraderRun, responses=errors(400, 408))
async def run_grader(
    body: GraderRunCreate,
    user: CurrentUser,
    session: SessionDep,
    graders: GradersDep,
    http: Request,
) -> Any:
    """Grade one model sample against one item; the reward, each grader's score, and what
    went wrong (a failing grader scores 0 with a flag, as OpenAI's). A client that goes
    away takes its grading with it (a python grader's sandbox is killed)."""

    def prepare() -> Tools:
        tools = graders.prepare(session, user, body.grader, "grader")
        session.commit()  # its connection goes back to the pool while the grader runs
        return tools

    tools = await run_in_threadpool(prepare)
    work = graders.run(body.grader, tools, body.model_sample, body.item)
    grade = await unless_client_leaves(http, work)
    if grade is None:
        return error_response(http.url.path, 408, "The client went away")
    return GraderRun.of(grade)
