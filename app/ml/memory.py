"""Giving memory back, and measuring it: used before and after every job, in every process."""

import ctypes
import ctypes.util
import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import psutil
from pydantic import BaseModel, ConfigDict

MIB = 1024**2
# glibc's mallopt parameters (malloc.h) and their values
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_GLIBC_DEFAULT_THRESHOLD = 128 * 1024
_GLIBC_MAX_MMAP_THRESHOLD = 32 * MIB  # the ceiling glibc accepts on 64-bit systems
_KEEP_UP_TO = 2**31 - 1  # mallopt takes an int


class MemorySnapshot(BaseModel):
    """This process's RSS and the device allocator's figures, in MiB (an event's field)."""

    model_config = ConfigDict(frozen=True)

    rss_mb: float
    peak_rss_mb: float | None = None  # the process's high-water mark so far (VmHWM)
    cuda_allocated_mb: float | None = None
    cuda_reserved_mb: float | None = None
    cuda_peak_mb: float | None = None
    mps_allocated_mb: float | None = None
    mps_driver_mb: float | None = None


@cache
def _glibc() -> Any:
    """The C library if it is glibc (mallopt, malloc_trim); None elsewhere (macOS, musl)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt  # noqa: B018 - musl has no mallopt
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def _malloc_trim() -> bool:
    """glibc keeps freed memory in the process; malloc_trim(0) returns it to the OS."""
    libc = _glibc()
    return bool(libc.malloc_trim(0)) if libc else False


def _keep_freed_memory(keep: bool) -> bool:
    """Set glibc's thresholds to keep freed memory, or back to its starting values.

    Once set, glibc no longer adapts its mmap threshold: "back" means 128 KiB, fixed.
    """
    libc = _glibc()
    if libc is None:
        return False
    limit = _GLIBC_MAX_MMAP_THRESHOLD if keep else _GLIBC_DEFAULT_THRESHOLD
    libc.mallopt(_M_MMAP_THRESHOLD, limit)
    libc.mallopt(_M_TRIM_THRESHOLD, _KEEP_UP_TO if keep else _GLIBC_DEFAULT_THRESHOLD)
    return True


@contextmanager
def heap_kept_between_steps() -> Iterator[bool]:
    """Keep freed memory in the process while training; give it back afterwards.

    glibc serves blocks over 128 KiB (its threshold adapts up to 32 MiB) with fresh mmap
    pages and gives the heap's free top back to the OS beyond a few MiB. A training step
    frees almost everything it allocated, so by default the next step page-faults its
    activations in again: 50,000-100,000 faults a step on the 23M benchmark shape, which
    ran 1.4-1.8x slower than with the memory kept (docs/benchmarks.md). Kept, the peak
    stays the same: a step reuses the pages the previous one freed. Yields whether it
    could (glibc only; elsewhere this does nothing).
    """
    kept = _keep_freed_memory(True)
    try:
        yield kept
    finally:
        if kept:
            _keep_freed_memory(False)
            _malloc_trim()


def release_memory(device: str | None = None, *, new_peak: bool = False) -> None:
    """gc, the device's cached blocks, then the C heap. Cheap: call it between jobs.
    With new_peak, CUDA's peak counts from here: a job's own, whatever ran before it."""
    gc.collect()
    torch = sys.modules.get("torch")  # never import torch just to clean up
    if torch is not None:
        if torch.cuda.is_available() and device in (None, "cuda"):
            torch.cuda.empty_cache()
            if new_peak:
                torch.cuda.reset_peak_memory_stats()
        if device in (None, "mps") and torch.backends.mps.is_available():
            torch.mps.empty_cache()
    _malloc_trim()


def memory_snapshot(device: str | None = None) -> MemorySnapshot:
    """RSS of this process and the device's allocator figures, in MiB."""
    rss = round(psutil.Process().memory_info().rss / MIB, 1)
    peak = _peak_rss_mb()
    torch = sys.modules.get("torch")
    if torch is not None and device == "cuda" and torch.cuda.is_available():
        return MemorySnapshot(
            rss_mb=rss,
            peak_rss_mb=peak,
            cuda_allocated_mb=round(torch.cuda.memory_allocated() / MIB, 1),
            cuda_reserved_mb=round(torch.cuda.memory_reserved() / MIB, 1),
            cuda_peak_mb=round(torch.cuda.max_memory_allocated() / MIB, 1),
        )
    if torch is not None and device == "mps" and torch.backends.mps.is_available():
        return MemorySnapshot(
            rss_mb=rss,
            peak_rss_mb=peak,
            mps_allocated_mb=round(torch.mps.current_allocated_memory() / MIB, 1),
            # The driver figure counts the allocator's cache too: the number the OS sees.
            mps_driver_mb=round(torch.mps.driver_allocated_memory() / MIB, 1),
        )
    return MemorySnapshot(rss_mb=rss, peak_rss_mb=peak)


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


@dataclass(frozen=True)
class MallocFigures:
    in_use: int  # handed out and not given back: what the process's objects hold
    held: int  # taken from the OS: in use, and the freed pieces glibc keeps


def malloc_figures() -> MallocFigures | None:
    """glibc's malloc over all its arenas, mmapped blocks included (RSS also counts mapped
    files: weights read from a safetensors file, the libraries). None without glibc ≥ 2.33."""
    libc = _glibc()
    mallinfo2 = getattr(libc, "mallinfo2", None) if libc else None
    if mallinfo2 is None:
        return None
    mallinfo2.restype = _Mallinfo2
    info = mallinfo2()
    return MallocFigures(int(info.uordblks + info.hblkhd), int(info.arena + info.hblkhd))


def _peak_rss_mb() -> float | None:
    """The high-water mark of this process's RSS: what the planner's estimate is held to.

    On Linux, VmHWM: getrusage's figure is not always this process's own (a process that
    another started with vfork, as Python's subprocess does, inherits its parent's peak at
    exec: `qatune train` run from a program that once held a model reports that model)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)  # kB
    except OSError:  # not Linux
        pass
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (MIB if sys.platform == "darwin" else 1024), 1)  # bytes there, KiB here


_MADV_PAGEOUT = 21  # Linux ≥ 5.4: reclaim these pages now (file pages are dropped)


def page_out(tensor: Any) -> None:
    """Ask the kernel to take back a CPU tensor's pages: for a weight read from a mapped
    checkpoint, its file pages leave this process's RSS (they are read again from the
    file if touched). Nothing changes for the tensor's values; elsewhere, a no-op."""
    libc = _glibc()
    if libc is None or tensor.device.type != "cpu" or not tensor.numel():
        return
    page = 4096
    start = tensor.data_ptr() // page * page
    end = tensor.data_ptr() + tensor.numel() * tensor.element_size()
    libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), _MADV_PAGEOUT)


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
