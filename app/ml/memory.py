"""Giving memory back, and measuring it: used before and after every job, in every process."""

import ctypes
import ctypes.util
import gc
import sys
from typing import Any

import psutil

MIB = 1024**2


def _malloc_trim() -> bool:
    """glibc keeps freed memory in the process; malloc_trim(0) returns it to the OS."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.malloc_trim(0))
    except (OSError, AttributeError):
        return False


def release_memory(device: str | None = None) -> None:
    """gc, the device's cached blocks, then the C heap. Cheap: call it between jobs."""
    gc.collect()
    torch = sys.modules.get("torch")  # never import torch just to clean up
    if torch is not None:
        if torch.cuda.is_available() and device in (None, "cuda"):
            torch.cuda.empty_cache()
        if device in (None, "mps") and torch.backends.mps.is_available():
            torch.mps.empty_cache()
    _malloc_trim()


def memory_snapshot(device: str | None = None) -> dict[str, Any]:
    """RSS of this process and the device's allocator figures, in MiB."""
    snapshot: dict[str, Any] = {"rss_mb": round(psutil.Process().memory_info().rss / MIB, 1)}
    torch = sys.modules.get("torch")
    if torch is None:
        return snapshot
    if device == "cuda" and torch.cuda.is_available():
        snapshot["cuda_allocated_mb"] = round(torch.cuda.memory_allocated() / MIB, 1)
        snapshot["cuda_reserved_mb"] = round(torch.cuda.memory_reserved() / MIB, 1)
        snapshot["cuda_peak_mb"] = round(torch.cuda.max_memory_allocated() / MIB, 1)
    elif device == "mps" and torch.backends.mps.is_available():
        snapshot["mps_allocated_mb"] = round(torch.mps.current_allocated_memory() / MIB, 1)
        # The driver figure counts the allocator's cache too: the number the OS sees.
        snapshot["mps_driver_mb"] = round(torch.mps.driver_allocated_memory() / MIB, 1)
    return snapshot


def is_out_of_memory(exc: BaseException) -> bool:
    """CUDA's OutOfMemoryError, the MPS message, or the CPU allocator giving up."""
    if isinstance(exc, MemoryError):
        return True
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(exc, torch.OutOfMemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and (
        text.startswith("MPS backend out of memory")
        or "CUDA out of memory" in text
        or "DefaultCPUAllocator: can't allocate memory" in text
        or "DefaultCPUAllocator: not enough memory" in text
    )
