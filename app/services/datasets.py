"""Datasets: validated at upload, stored normalized as JSONL, visible to their owner."""

import hashlib
from pathlib import Path

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from app.core.errors import NotFoundError
from app.core.storage import Storage, new_key, write_atomic
from app.db.models import Dataset, User
from app.services.qa_parsing import parse_qa_bytes, read_jsonl, write_jsonl

PREVIEW_ROWS = 5


def create_dataset(
    session: Session,
    *,
    owner: User,
    storage: Storage,
    content: bytes,
    filename: str | None,
    name: str | None,
    max_rows: int,
) -> Dataset:
    parsed = parse_qa_bytes(content, filename=filename, max_rows=max_rows)
    normalized = write_jsonl(parsed.pairs)
    key = new_key()
    path = storage.dataset_file(key)
    write_atomic(path, normalized)
    dataset = Dataset(
        owner_id=owner.id,
        name=(name or Path(filename or "dataset").name)[:200],
        format=parsed.format,
        num_examples=len(parsed.pairs),
        size_bytes=len(content),
        sha256=hashlib.sha256(normalized).hexdigest(),
        storage_key=key,
    )
    session.add(dataset)
    try:
        session.flush()
    except BaseException:
        path.unlink(missing_ok=True)  # no file without its row
        raise
    return dataset


def visible_datasets(user: User) -> Select[Dataset]:
    query = select(Dataset)
    return query if user.is_admin else query.where(Dataset.owner_id == user.id)


def list_datasets(session: Session, *, user: User) -> list[Dataset]:
    return list(session.scalars(visible_datasets(user).order_by(Dataset.id.desc())))


def get_dataset(session: Session, *, user: User, dataset_id: int) -> Dataset:
    dataset = session.scalar(visible_datasets(user).where(Dataset.id == dataset_id))
    if dataset is None:
        # Someone else's dataset is "not found" too: ids of others' data are not revealed.
        raise NotFoundError(f"Dataset {dataset_id} not found; GET /datasets lists yours")
    return dataset


def read_pairs(storage: Storage, dataset: Dataset) -> list[tuple[str, str]]:
    return read_jsonl(storage.dataset_file(dataset.storage_key).read_text())


def preview(storage: Storage, dataset: Dataset) -> list[tuple[str, str]]:
    with storage.dataset_file(dataset.storage_key).open() as handle:
        lines = [line for _, line in zip(range(PREVIEW_ROWS), handle, strict=False)]
    return read_jsonl("".join(lines))


def delete_dataset(session: Session, *, user: User, storage: Storage, dataset_id: int) -> None:
    """Jobs keep their own copy of the data, so they are unaffected."""
    dataset = get_dataset(session, user=user, dataset_id=dataset_id)
    session.delete(dataset)
    session.flush()
    storage.dataset_file(dataset.storage_key).unlink(missing_ok=True)
