"""OpenAI's model objects for /v1/models."""

from typing import Literal

from pydantic import BaseModel


class Model(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int  # Unix seconds
    owned_by: str
    shutdown_date: str | None = None  # a qatune model is served until it is deleted
    parent: str | None = None  # a fine-tuned model's base (as vLLM's server says it)
