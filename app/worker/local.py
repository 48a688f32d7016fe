"""The local executor: each job's run is a training child process on this machine, told
what to do by signals and heard from over a pipe (app/worker/child.py is its side)."""

import multiprocessing
import os
import signal
import sys
from multiprocessing import forkserver
from multiprocessing.context import ForkServerContext, SpawnContext

from loguru import logger

from app.jobs.outcomes import Interrupted, Outcome
from app.jobs.spec import TrainingSpec
from app.ml.events import StopRequest
from app.worker.child import run_child
from app.worker.exits import exit_reason, oom_kill_count
from app.worker.protocol import ChildMessage

SIGNALS: dict[StopRequest, signal.Signals] = {"cancel": signal.SIGUSR2, "pause": signal.SIGUSR1}


PRELOAD = ["app.worker.preload"]  # what the fork server imports once (training_processes)


def training_processes() -> ForkServerContext | SpawnContext:
    """How training children start. On Linux they fork from a server process that imported
    torch, transformers and peft once (preload.py), instead of each importing them anew;
    each is still a fresh process, whose memory all goes back when it ends. The server
    starts with the first job, not with the service: a service that only serves, or waits,
    never pays its imports (~7 s of a core here) or its ~350 MB. Elsewhere (macOS: forking after
    Apple's frameworks have loaded is not safe), or where the fork server cannot start,
    each is spawned."""
    global _forkserver_failed
    if not sys.platform.startswith("linux") or _forkserver_failed:
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    try:
        forkserver.ensure_running()
    except OSError as exc:  # its socket lives under TMPDIR: a long one is too long for it
        logger.warning("Training children are spawned (the fork server did not start: {})", exc)
        _forkserver_failed = True
        return multiprocessing.get_context("spawn")
    return context


_forkserver_failed = False


class LocalRun:
    """A training child process on this machine; messages over a pipe, stops as signals."""

    def __init__(self, spec: TrainingSpec) -> None:
        context = training_processes()
        self._receiver, sender = context.Pipe(duplex=False)
        self.process = context.Process(
            target=run_child, args=(spec, sender), name=f"train-job-{spec.job_id}"
        )
        self._oom_kills = oom_kill_count()
        self.process.start()
        sender.close()

    def receive(self) -> list[ChildMessage] | None:
        messages: list[ChildMessage] = []
        try:
            if self._receiver.poll(0.5):
                while True:
                    messages.append(self._receiver.recv())
                    if not self._receiver.poll(0):
                        break
        except (EOFError, OSError):  # pipe closed: the child has exited
            if messages:
                return messages
            self.process.join()
            return None
        return messages

    def ask(self, request: StopRequest) -> None:
        if self.process.pid:
            os.kill(self.process.pid, SIGNALS[request])  # it stops between two micro-batches

    def kill(self) -> None:
        self.process.kill()

    def silent_end(self) -> Outcome:
        self.process.join()
        return Interrupted(exit_reason(self.process.exitcode, oom_kills_before=self._oom_kills))
