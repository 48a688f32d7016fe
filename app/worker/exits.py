"""Why a training child that sent no outcome ended: what the OS can tell, not a guess."""

import signal
from pathlib import Path

from app.core.language import Sentence, said

CGROUP_ROOTS = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/memory"))


def _cgroup_paths() -> list[str]:
    """This process's memory cgroup, v2 (`0::/path`) or v1 (`N:memory:/path`)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []
    paths = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers in ("", "memory"):
            paths.append(path.lstrip("/"))
    return paths


def oom_kill_count() -> int | None:
    """How many processes the kernel's OOM killer has killed in our cgroup; None: unknown."""
    for root in CGROUP_ROOTS:
        for relative in [*_cgroup_paths(), ""]:
            for name in ("memory.events", "memory.oom_control"):
                path = root / relative / name
                try:
                    for line in path.read_text().splitlines():
                        key, _, value = line.partition(" ")
                        if key == "oom_kill":
                            return int(value)
                except (OSError, ValueError):
                    continue
    return None


def exit_reason(exitcode: int | None, *, oom_kills_before: int | None) -> Sentence:
    """How a training process ended that said nothing, read in its reader's language."""
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name if -exitcode in signal.valid_signals() else None
        after = oom_kill_count()
        if oom_kills_before is not None and after is not None and after > oom_kills_before:
            return said(
                "the kernel's out-of-memory killer stopped the training process: lower "
                "max_seq_length or micro_batch_size, use a smaller base model, or free memory"
            )
        signal_name = name or f"signal {-exitcode}"
        return said("the training process was killed ({signal})", signal=signal_name)
    return said(
        "the training process exited unexpectedly (exit code {code}); see the job log",
        code=str(exitcode),
    )
