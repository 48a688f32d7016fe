"""/datasets: upload QA files (every problem named by its line), list, preview, delete."""

from typing import Annotated

from fastapi import APIRouter, File, Form, Request, UploadFile, status
from fastapi.concurrency import run_in_threadpool

from app.api.deps import CurrentUser, DatasetsDep, ResourceId, SessionDep
from app.core.errors import PayloadTooLarge
from app.core.language import tr
from app.db.models import Dataset
from app.schemas.datasets import DatasetDetail, DatasetOut, QAPair
from app.services.datasets import files as datasets_service
from app.services.datasets.face import Datasets

router = APIRouter(prefix="/datasets", tags=["datasets"])
CHUNK = 1024 * 1024


async def read_limited(upload: UploadFile, limit: int) -> bytes:
    chunks, size = [], 0
    while chunk := await upload.read(CHUNK):
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(
                tr(
                    "The file is over the {limit:g} MB upload limit; split it or raise "
                    "QATUNE_MAX_UPLOAD_MB",
                    limit=round(limit / 1024 / 1024, 3),
                )
            )
        chunks.append(chunk)
    return b"".join(chunks)


@router.post("", status_code=status.HTTP_201_CREATED)
async def upload_dataset(
    request: Request,
    user: CurrentUser,
    session: SessionDep,
    datasets: DatasetsDep,
    file: Annotated[UploadFile, File(description="JSONL, JSON array or CSV of QA pairs")],
    name: Annotated[str | None, Form(max_length=200)] = None,
) -> DatasetDetail:
    limit = datasets.max_upload_bytes
    if int(request.headers.get("content-length") or 0) > limit + 64 * 1024:
        raise PayloadTooLarge(
            tr(
                "The upload is over the {limit:g} MB limit; split it or raise QATUNE_MAX_UPLOAD_MB",
                limit=limit / 1024 / 1024,
            )
        )
    content = await read_limited(file, limit)
    # Parsing a large file takes seconds: in a worker thread, never on the event loop.
    dataset = await run_in_threadpool(
        datasets.create, session, user, content, filename=file.filename, name=name
    )
    return await run_in_threadpool(detail, datasets, dataset)


def detail(datasets: Datasets, dataset: Dataset) -> DatasetDetail:
    rows = datasets.preview(dataset)
    return DatasetDetail(
        **DatasetOut.model_validate(dataset).model_dump(),
        preview=[QAPair.model_validate(p.to_record()) for p in rows],
    )


@router.get("")
def list_datasets(user: CurrentUser, session: SessionDep) -> list[DatasetOut]:
    return [
        DatasetOut.model_validate(d) for d in datasets_service.list_datasets(session, user=user)
    ]


@router.get("/{dataset_id:int}")
def get_dataset(
    dataset_id: ResourceId, user: CurrentUser, session: SessionDep, datasets: DatasetsDep
) -> DatasetDetail:
    return detail(datasets, datasets_service.get_dataset(session, user=user, dataset_id=dataset_id))


@router.delete("/{dataset_id:int}", status_code=status.HTTP_204_NO_CONTENT)
def delete_dataset(
    dataset_id: ResourceId, user: CurrentUser, session: SessionDep, datasets: DatasetsDep
) -> None:
    datasets.delete(session, user, dataset_id)
