"""OpenAI's file objects for /v1/files."""

from typing import Literal

from app.schemas.openai.common import Listed


class FileObject(Listed):
    object: Literal["file"] = "file"
    bytes: int
    created_at: int  # Unix seconds
    filename: str
    purpose: str
    status: Literal["uploaded", "processed", "error"] = "processed"
    status_details: str | None = None
    expires_at: int | None = None  # a qatune file stays until it is deleted
