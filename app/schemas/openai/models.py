from typing import Literal

from pydantic import BaseModel


class Model(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int  # Unix seconds
    owned_by: str
    parent: str | None = None  # a fine-tuned model's base (as vLLM's server says it)
