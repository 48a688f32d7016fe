"""What the routes do with datasets that needs the storage or the limits, wired in once:
the native upload and OpenAI's files go through the same checks."""

from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.storage import Storage
from app.db.models import Dataset, User
from app.ml.pairs import QAPair
from app.services.datasets import files


@dataclass(frozen=True)
class Datasets:
    storage: Storage
    settings: Settings  # the upload and row limits

    @property
    def max_upload_bytes(self) -> int:
        return self.settings.max_upload_bytes

    def create(
        self,
        session: Session,
        owner: User,
        content: bytes,
        *,
        filename: str | None,
        name: str | None = None,
        purpose: str = "fine-tune",
    ) -> Dataset:
        """Parsed and validated (seconds for a large file: call it off the event loop)."""
        return files.create_dataset(
            session,
            owner=owner,
            storage=self.storage,
            content=content,
            filename=filename,
            name=name,
            max_rows=self.settings.max_dataset_rows,
            purpose=purpose,
        )

    def preview(self, dataset: Dataset) -> list[QAPair]:
        return files.preview(self.storage, dataset)

    def original_content(self, dataset: Dataset) -> bytes:
        return files.original_content(self.storage, dataset)

    def delete(self, session: Session, user: User, dataset_id: int) -> Dataset:
        return files.delete_dataset(session, user=user, storage=self.storage, dataset_id=dataset_id)
