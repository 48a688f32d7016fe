"""OpenAI's model objects for /v1/models."""

from typing import Literal

from app.schemas.openai.common import Listed


class Model(Listed):
    object: Literal["model"] = "model"
    created: int  # Unix seconds
    owned_by: str
    shutdown_date: str | None = None  # a qatune model is served until it is deleted
    parent: str | None = None  # a fine-tuned model's base (as vLLM's server says it)
