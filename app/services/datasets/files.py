"""Datasets: validated at upload, stored normalized as JSONL, visible to their owner.

A dataset is training data (purpose `fine-tune`: QA pairs, chat, preference or
reinforcement records), or an eval's items (purpose `evals`, OpenAI's eval file lines),
which only evals read."""

import hashlib
import json
from pathlib import Path

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from app.core.errors import NotFoundError, ValidationFailed
from app.core.language import tr
from app.core.storage import Storage, new_key, write_atomic
from app.db.models import Dataset, User
from app.db.paging import cursor_page
from app.db.session import undo_unless_committed
from app.ml.pairs import QAPair, data_kind
from app.services.datasets.qa_parsing import parse_qa_bytes, read_jsonl, write_jsonl
from app.services.evals.files import parse_eval_file

PREVIEW_ROWS = 5
EVALS = "evals"


def create_dataset(
    session: Session,
    *,
    owner: User,
    storage: Storage,
    content: bytes,
    filename: str | None,
    name: str | None,
    max_rows: int,
    purpose: str = "fine-tune",
) -> Dataset:
    if purpose == EVALS:
        rows = parse_eval_file(content, max_rows=max_rows)
        lines = (json.dumps(r.model_dump(exclude_none=True), ensure_ascii=False) for r in rows)
        normalized, data_format, count = ("\n".join(lines) + "\n").encode(), "jsonl", len(rows)
        kind, notes = None, []  # an eval's items, not training data
    else:
        parsed = parse_qa_bytes(content, filename=filename, max_rows=max_rows)
        normalized, data_format, count = write_jsonl(parsed.pairs), parsed.format, len(parsed.pairs)
        kind, notes = data_kind(parsed.pairs), parsed.notes
    key = new_key()
    path, original = storage.dataset_file(key), storage.dataset_original(key)

    def forget_files() -> None:  # no file without its row
        path.unlink(missing_ok=True)
        original.unlink(missing_ok=True)

    undo_unless_committed(session, forget_files)
    write_atomic(path, normalized)
    write_atomic(original, content)
    dataset = Dataset(
        owner_id=owner.id,
        name=(name or Path(filename or "dataset").name)[:200],
        format=data_format,
        kind=kind,
        num_examples=count,
        size_bytes=len(content),
        sha256=hashlib.sha256(normalized).hexdigest(),
        purpose=purpose,
        storage_key=key,
        notes=notes or None,
    )
    session.add(dataset)
    session.flush()
    return dataset


def original_content(storage: Storage, dataset: Dataset) -> bytes:
    """The file as uploaded; the normalized JSONL for datasets kept before originals were."""
    original = storage.dataset_original(dataset.storage_key)
    return original.read_bytes() if original.exists() else read_normalized(storage, dataset)


def read_normalized(storage: Storage, dataset: Dataset) -> bytes:
    return storage.dataset_file(dataset.storage_key).read_bytes()


def visible_datasets(user: User) -> Select[Dataset]:
    query = select(Dataset)
    return query if user.is_admin else query.where(Dataset.owner_id == user.id)


def list_datasets(session: Session, *, user: User) -> list[Dataset]:
    return list(session.scalars(visible_datasets(user).order_by(Dataset.id.desc())))


def page(
    session: Session,
    *,
    user: User,
    after: int | None,
    limit: int,
    newest_first: bool,
    purpose: str | None = None,
) -> tuple[list[Dataset], bool]:
    """A cursor page: up to `limit` datasets past `after`, and whether more follow."""
    query = visible_datasets(user)
    if purpose:
        query = query.where(Dataset.purpose == purpose)
    return cursor_page(
        session, query, Dataset.id, after=after, limit=limit, newest_first=newest_first
    )


def get_dataset(session: Session, *, user: User, dataset_id: int) -> Dataset:
    dataset = session.scalar(visible_datasets(user).where(Dataset.id == dataset_id))
    if dataset is None:
        # Someone else's dataset is "not found" too: ids of others' data are not revealed.
        raise NotFoundError(
            tr("Dataset {dataset_id} not found; GET /datasets lists yours", dataset_id=dataset_id)
        )
    return dataset


def read_pairs(storage: Storage, dataset: Dataset) -> list[QAPair]:
    """The training records; ValidationFailed for an eval file, which holds none."""
    if dataset.purpose == EVALS:
        raise ValidationFailed(
            tr(
                "Dataset {dataset_id} holds an eval's items (uploaded with purpose evals), "
                "not training data: upload that with purpose fine-tune",
                dataset_id=dataset.id,
            ),
            details=[{"field": "dataset_id", "message": tr("an eval file")}],
        )
    return read_jsonl(storage.dataset_file(dataset.storage_key).read_text())


def preview(storage: Storage, dataset: Dataset) -> list[QAPair]:
    """The first few training records (none for an eval file)."""
    if dataset.purpose == EVALS:
        return []
    with storage.dataset_file(dataset.storage_key).open() as handle:
        lines = [line for _, line in zip(range(PREVIEW_ROWS), handle, strict=False)]
    return read_jsonl("".join(lines))


def delete_dataset(session: Session, *, user: User, storage: Storage, dataset_id: int) -> Dataset:
    """Jobs keep their own copy of the data, so they are unaffected."""
    dataset = get_dataset(session, user=user, dataset_id=dataset_id)
    session.delete(dataset)
    session.flush()
    storage.dataset_file(dataset.storage_key).unlink(missing_ok=True)
    storage.dataset_original(dataset.storage_key).unlink(missing_ok=True)
    return dataset
