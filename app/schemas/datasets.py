"""Datasets as the native API shows them: an uploaded file's summary and a preview of its rows."""

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AliasPath, BaseModel, BeforeValidator, ConfigDict, Field

from app.core.language import Sentence
from app.ml.pairs import DataKind


class ToolCall(BaseModel):
    name: str
    arguments: str  # JSON text
    id: str | None = None


class Turn(BaseModel):
    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: list[ToolCall] = []  # an assistant's
    tool_call_id: str | None = None  # a tool result's


class QAPair(BaseModel):
    """One answer to learn; `history`: the turns of its conversation before the question;
    with function calling, `tools` (OpenAI's definitions, as JSON text), `tool_turns` (the
    calls and results between the question and the answer) and the answer's own calls."""

    question: str
    answer: str
    system: str | None = None
    history: list[Turn] = []
    tools: str | None = None
    tool_turns: list[Turn] = []
    answer_tool_calls: list[ToolCall] = []


def read_notes(kept: list[Sentence] | list[str] | None) -> list[str]:
    """A dataset's notes in the language of the request being answered: sentences from its
    row, or text already read (FastAPI validates a returned model's dump once more)."""
    return [note.text() if isinstance(note, Sentence) else note for note in kept or []]


class DatasetOut(BaseModel):
    # read from its row: DatasetOut.model_validate(dataset)
    model_config = ConfigDict(from_attributes=True, validate_by_name=True)

    id: int
    name: str
    format: str
    kind: DataKind | None = Field(
        default=None,
        description="what it holds: qa, chat, tools, preference or reinforcement (null: an "
        "eval's items, or a file uploaded before kinds were kept)",
    )
    num_examples: int
    size_bytes: int
    sha256: str
    owner: str = Field(validation_alias=AliasPath("owner", "username"))
    created_at: datetime
    purpose: Literal["fine-tune", "evals"] = Field(
        description="fine-tune: training data; evals: an eval's items (POST /v1/files)"
    )
    notes: Annotated[list[str], BeforeValidator(read_notes)] = Field(
        default=[],
        description="what reading the file passed over, the upload whole without it: a "
        "workbook's sheet that names no table, a hidden sheet that does, a column no field "
        "is read from",
    )


class DatasetDetail(DatasetOut):
    preview: list[QAPair]
