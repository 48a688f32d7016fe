"""/v1/files: a file is a qatune dataset, the same one the native API shows."""

from typing import Annotated, Literal

from fastapi import APIRouter, File, Form, Query, Response, UploadFile
from fastapi.concurrency import run_in_threadpool

from app.api.deps import CurrentUser, DatasetsDep, SessionDep
from app.api.openapi import errors
from app.api.routes.datasets import read_limited
from app.core.errors import BadRequest, ValidationFailed
from app.core.language import tr
from app.db.models import Dataset, User
from app.schemas.datasets import read_notes
from app.schemas.openai.common import CursorPage, Deleted
from app.schemas.openai.files import FileObject
from app.services import openai_ids
from app.services.datasets import files as datasets_service

router = APIRouter(prefix="/files")
PURPOSES = ("fine-tune", "evals")


def to_file(dataset: Dataset) -> FileObject:
    return FileObject(
        id=openai_ids.FILE.of(dataset.id),
        bytes=dataset.size_bytes,
        created_at=int(dataset.created_at.timestamp()),
        filename=dataset.name,
        purpose=dataset.purpose,
        status_details="; ".join(read_notes(dataset.notes)) or None,  # what was passed over
    )


def get_file(session: SessionDep, user: User, file_id: str) -> Dataset:
    return openai_ids.FILE.find(
        file_id, lambda number: datasets_service.get_dataset(session, user=user, dataset_id=number)
    )


@router.post("", responses=errors(400))
async def upload_file(
    user: CurrentUser,
    session: SessionDep,
    datasets: DatasetsDep,
    file: Annotated[
        UploadFile,
        File(description="fine-tune: JSONL of chat records or QA pairs; evals: JSONL of items"),
    ],
    purpose: Annotated[
        str, Form(max_length=40, json_schema_extra={"enum": list(PURPOSES)})
    ],  # any other purpose is OpenAI's 400, not a 422
) -> FileObject:
    """Upload training data or an eval's items (`{"item": {...}}` a line, as OpenAI's API
    takes and exports them); a bad file is a 400 naming each problem's line."""
    if purpose not in PURPOSES:
        raise BadRequest(
            tr(
                "qatune takes files for fine-tuning and evals: purpose must be 'fine-tune' or "
                "'evals', not {purpose!r}",
                purpose=purpose[:40],
            ),
            param="purpose",
        )
    content = await read_limited(file, datasets.max_upload_bytes)
    try:
        dataset = await run_in_threadpool(
            datasets.create, session, user, content, filename=file.filename, purpose=purpose
        )
    except ValidationFailed as exc:
        raise BadRequest(_problems(exc), param="file", details=exc.details) from exc
    return to_file(dataset)


def _problems(exc: ValidationFailed) -> str:
    shown = []
    for problem in exc.details[:5]:
        where = f"line {problem['line']}" if "line" in problem else f"item {problem.get('item')}"
        if "sheet" in problem:
            where = f"sheet {problem['sheet']!r}, {where}"
        shown.append(f"{where}: {problem['message']}")
    return f"{exc.message}: " + "; ".join(shown) if shown else exc.message


@router.get("", responses=errors(400))
def list_files(
    user: CurrentUser,
    session: SessionDep,
    purpose: Annotated[str | None, Query(max_length=40)] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 10_000,
    after: Annotated[str | None, Query(max_length=40)] = None,
    order: Literal["asc", "desc"] = "desc",
) -> CursorPage[FileObject]:
    """Your files, newest first by default; `after` is the last id of the page before."""
    found, more = datasets_service.page(
        session,
        user=user,
        after=openai_ids.FILE.after(after),
        limit=limit,
        newest_first=order == "desc",
        purpose=purpose,
    )
    return CursorPage.of([to_file(d) for d in found], more)


@router.get("/{file_id}")
def retrieve_file(file_id: str, user: CurrentUser, session: SessionDep) -> FileObject:
    return to_file(get_file(session, user, file_id))


@router.get(
    "/{file_id}/content",
    response_class=Response,
    responses={200: {"content": {"application/octet-stream": {}}, "description": "the file"}},
)
def file_content(
    file_id: str, user: CurrentUser, session: SessionDep, datasets: DatasetsDep
) -> Response:
    """The file as it was uploaded."""
    dataset = get_file(session, user, file_id)
    return Response(datasets.original_content(dataset), media_type="application/octet-stream")


@router.delete("/{file_id}")
def delete_file(
    file_id: str, user: CurrentUser, session: SessionDep, datasets: DatasetsDep
) -> Deleted:
    """Jobs keep their own copy of the data, so they are unaffected."""
    datasets.delete(session, user, get_file(session, user, file_id).id)
    return Deleted(id=file_id, object="file")
