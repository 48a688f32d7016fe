"""Data parallel training (DDP): several processes train one job, each on its own device
with its share of every step's examples, their gradients summed before each optimizer step.

What DistributedDataParallel does, done by hand: the loop's step is packed micro-batches
and a loss summed over answer tokens, not one module call, so the loop sums the LoRA
gradients itself (one all-reduce of all of them a step) and divides by the answer tokens
of the whole step, which makes the update the one a single process would compute. Rank 0
is the job's own process: it reports, checkpoints and saves; it starts the others
(`start_helpers`), which train the same steps in lockstep and say nothing. Every decision
that changes the schedule (stop, time limit, which answers are learned) is rank 0's or
made from data merged across ranks, so no rank ever waits on a collective another skipped.

Backends: NCCL on CUDA (one GPU a process), gloo on the CPU (how it is tested here).
"""

from __future__ import annotations

import multiprocessing
import socket
from collections.abc import Callable, Iterable
from datetime import timedelta
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from app.ml.data import Example
from app.ml.events import StopRequest
from app.ml.training.request import Replica

if TYPE_CHECKING:
    from app.ml.training.until_learned import UntilLearned

STOP_CODES: dict[StopRequest | None, int] = {None: 0, "cancel": 1, "pause": 2}
# How long a collective waits for a rank that has stopped answering (it died) before the
# job fails instead of hanging.
COLLECTIVE_TIMEOUT = timedelta(minutes=5)


def rendezvous_address() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{sock.getsockname()[1]}"


def start_helpers(run: Callable[[Replica], None], world: int, address: str) -> list[BaseProcess]:
    """Ranks 1..world-1, each a fresh process running `run(replica)`."""
    context = multiprocessing.get_context("spawn")
    helpers: list[BaseProcess] = [
        context.Process(target=run, args=(Replica(rank, world, address),), daemon=True)
        for rank in range(1, world)
    ]
    for helper in helpers:
        helper.start()
    return helpers


def stop_helpers(helpers: list[BaseProcess], timeout: float = 10.0) -> None:
    for helper in helpers:
        helper.join(timeout)
        if helper.is_alive():  # stuck in a collective rank 0 left: nothing more to do
            helper.kill()
            helper.join()


class Replicas:
    """One process's handle on the group: what each step shares, sums and agrees on."""

    def __init__(self, replica: Replica, device: str) -> None:
        self.rank, self.world = replica.rank, replica.world
        if device == "cuda":
            torch.cuda.set_device(replica.rank)
        self.device = (
            torch.device(device, replica.rank) if device == "cuda" else torch.device(device)
        )
        dist.init_process_group(
            "nccl" if device == "cuda" else "gloo",
            init_method=replica.address,
            rank=replica.rank,
            world_size=replica.world,
            timeout=COLLECTIVE_TIMEOUT,
        )

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()

    def share(self, examples: list[Example]) -> list[Example]:
        """This rank's examples of a step (every rank holds the same schedule)."""
        return examples[self.rank :: self.world]

    def _sum(self, values: list[float]) -> list[float]:
        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor)
        return [float(v) for v in tensor.tolist()]

    def agree(self, stop: StopRequest | None, answer_tokens: int) -> tuple[StopRequest | None, int]:
        """Rank 0's stop request, and the answer tokens of the whole step: one collective."""
        code, total = self._sum([STOP_CODES[stop] if self.is_main else 0, answer_tokens])
        return next(s for s, c in STOP_CODES.items() if c == round(code)), round(total)

    def main_value(self, value: float) -> float:
        """Rank 0's value, on every rank (its clock: the time limit is its decision)."""
        return self._sum([value if self.is_main else 0.0])[0]

    def sum(self, *values: float) -> list[float]:
        return self._sum(list(values))

    def sum_gradients(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        """Every rank's gradient summed into each parameter's, in one all-reduce."""
        params = list(parameters)
        for p in params:
            if p.grad is None:  # a rank with no example this step
                p.grad = torch.zeros_like(p)
        flat = torch.cat([p.grad.reshape(-1) for p in params if p.grad is not None])
        dist.all_reduce(flat)
        offset = 0
        for p in params:
            assert p.grad is not None
            n = p.grad.numel()
            p.grad.copy_(flat[offset : offset + n].view_as(p.grad))
            offset += n

    def merge_learned(self, watch: UntilLearned, examples: list[Example]) -> None:
        """What each rank saw of its answers since the last merge (each example is seen by
        one rank an epoch), and its token counts, merged so that every rank makes the same
        end-of-epoch decision."""
        index = {id(example): i for i, example in enumerate(examples)}
        mine = (
            {index[key]: watch.answered[key] for key in watch.recorded},
            watch.hits,
            watch.targets,
        )
        gathered: list[Any] = [None] * self.world
        dist.all_gather_object(gathered, mine)
        watch.recorded.clear()
        watch.hits = watch.targets = 0
        for answered, hits, targets in gathered:
            for i, right in answered.items():
                watch.answered[id(examples[i])] = right
            watch.hits += hits
            watch.targets += targets
