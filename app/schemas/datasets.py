from datetime import datetime
from typing import Literal

from pydantic import BaseModel


class Turn(BaseModel):
    role: Literal["system", "user", "assistant"]
    content: str


class QAPair(BaseModel):
    """One answer to learn; `history`: the turns of its conversation before the question."""

    question: str
    answer: str
    system: str | None = None
    history: list[Turn] = []


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
