"""The training precision's tools, shared by training and the serving engine: torch's
dtype for a precision's name, and autocast to it."""

from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def autocast_for(device: str, precision: str) -> AbstractContextManager[Any]:
    """The same mixed precision as training: autocast to bf16/fp16, nothing for fp32."""
    if precision == "fp32":
        return nullcontext()
    return torch.autocast(device_type=device, dtype=DTYPES[precision])
