"""How many threads torch should use now on a CPU: the cores the rest of the machine leaves
free. The training loop follows it, and so does every engine that decodes (the service's,
the answer table's, reinforcement's samples).

Torch's OpenMP threads meet at a barrier in every op, so when the scheduler preempts one of
them the others wait for it. Beside one busy core, two training threads at niceness 10 ran
at 89 tokens/s where one ran at 4,780 (docs/benchmarks.md, "Sharing the CPU"). So the loop
asks, about once a second, how much CPU everyone else used and keeps its threads off the
cores they took; when they go, the threads come back.
"""

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil
import torch

SAMPLE_EVERY_S = 1.0
# A co-tenant under ~0.4 of a core costs two threads less than dropping one (measured:
# beside a 25% duty cycle 4,949 vs 4,720 tok/s; beside 50%, 3,140 vs 4,985).
SPARE_CORE = 0.4


@dataclass(frozen=True)
class CpuSample:
    at: float
    busy_s: float  # all CPUs, everyone
    total_s: float
    own_s: float  # this process, all its threads


def _sample(process: psutil.Process) -> CpuSample:
    times = psutil.cpu_times()
    idle = times.idle + getattr(times, "iowait", 0.0)
    # A virtual machine's steal is time the host gave someone else: no program here used
    # it, and fewer threads would not get it back (on a shared 2-core runner it was half a
    # core while only this process ran). Guest time is already inside user and nice.
    hidden = sum(getattr(times, name, 0.0) for name in ("steal", "guest", "guest_nice"))
    total = sum(times) - hidden
    own = process.cpu_times()
    return CpuSample(time.monotonic(), total - idle, total, own.user + own.system)


def threads_for(others_cores: float, logical: int, physical: int) -> int:
    """Threads that fit beside `others_cores` of other programs' work, one at least."""
    free = logical - others_cores
    return max(1, min(physical, math.floor(free + SPARE_CORE)))


class CpuShare:
    """Call `adjust()` between steps; it sets torch's threads and says when they changed."""

    def __init__(self, physical: int) -> None:
        self.physical = max(1, physical)
        self.logical = psutil.cpu_count() or self.physical
        self.process = psutil.Process()
        self.threads = self.physical
        self.others_cores = 0.0
        self._last = _sample(self.process)
        self._raise_seen = False
        torch.set_num_threads(self.threads)

    def adjust(self) -> bool:
        """Re-measure when a second has passed; True when the thread count changed."""
        if time.monotonic() - self._last.at < SAMPLE_EVERY_S:
            return False  # (called before every decode step: no system call until then)
        now = _sample(self.process)
        last, self._last = self._last, now
        total = now.total_s - last.total_s
        if total <= 0:
            return False
        others_s = max(0.0, now.busy_s - last.busy_s - (now.own_s - last.own_s))
        self.others_cores = others_s / total * self.logical
        wanted = threads_for(self.others_cores, self.logical, self.physical)
        if wanted > self.threads and not self._raise_seen:
            self._raise_seen = True  # a lull of one second is not a free core: look twice
            return False
        self._raise_seen = False
        if wanted == self.threads:
            return False
        self.threads = wanted
        torch.set_num_threads(wanted)
        return True


def share_cpu_on_another_thread(share: CpuShare | None) -> Callable[[], None]:
    """For another thread (an engine's): torch's thread count is per thread, so it follows
    the share of the CPU from there, as the loop does on its own."""
    fixed = torch.get_num_threads()

    def adjust() -> None:
        if share is not None:
            share.adjust()
        wanted = share.threads if share is not None else fixed
        if torch.get_num_threads() != wanted:
            torch.set_num_threads(wanted)

    return adjust


def share_cpu_from_this_thread(physical: int) -> Callable[[], None]:
    """For an engine that no loop shares with (the service's): a share of its own, made at
    its first call, on the engine's thread, so that the thread that made the engine keeps
    its own count."""
    share: CpuShare | None = None

    def adjust() -> None:
        nonlocal share
        if share is None:
            share = CpuShare(physical)
        share.adjust()

    return adjust
