from datetime import datetime

from pydantic import BaseModel


class QAPair(BaseModel):
    question: str
    answer: str
    system: str | None = None


class DatasetOut(BaseModel):
    id: int
    name: str
    format: str
    num_examples: int
    size_bytes: int
    sha256: str
    owner: str
    created_at: datetime


class DatasetDetail(DatasetOut):
    preview: list[QAPair]
