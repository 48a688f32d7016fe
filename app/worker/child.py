"""The training child process: runs one ModelTrainer and reports over a pipe.

A child of its own, so that the API stays responsive, a crash or OOM kill cannot take the
service down, cancel is a signal, and all the memory the job used goes back to the OS.
"""

import os
import select
import signal
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

from app.core.logging import FORMAT, setup_logging
from app.core.processes import die_with_parent
from app.jobs.spec import TrainingSpec
from app.worker.protocol import ChildMessage
from app.worker.run import train

if TYPE_CHECKING:
    from app.ml.events import StopRequest


def run_child(spec: TrainingSpec, conn: Connection) -> None:
    die_with_parent()
    os.nice(spec.niceness)
    spec.torch_environment.apply()
    setup_logging(spec.log_dir)
    from loguru import logger

    logger.add(spec.job_log, format=FORMAT, level="INFO", encoding="utf-8", diagnose=False)
    # SIGUSR2: cancel (stop now, save nothing); SIGUSR1: pause (stop at a checkpoint).
    # SIGINT and SIGTERM are the service's to act on: Ctrl-C in a terminal and systemd's
    # stop reach the whole process group, and the service then pauses this run itself.
    asked: list[StopRequest] = []
    signal.signal(signal.SIGUSR2, lambda *_: asked.append("cancel"))
    signal.signal(signal.SIGUSR1, lambda *_: asked.append("pause"))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

    orphaned = supervisor_watch(conn)

    def should_stop() -> "StopRequest | None":
        if orphaned():  # asked between micro-batches: end before anything more is written
            os.kill(os.getpid(), signal.SIGKILL)
        return "cancel" if "cancel" in asked else (asked[0] if asked else None)

    def send(message: ChildMessage) -> None:
        conn.send(message)

    from app.ml.events import TrainingEvent

    def emit(event: TrainingEvent) -> None:
        logger.log(event.level, "job {}: {}", spec.job_id, event.message.english())
        send(event)

    try:
        send(train(spec, emit=emit, should_stop=should_stop))
    except BrokenPipeError:
        pass  # the supervisor is gone; nobody to report to
    finally:
        conn.close()


def supervisor_watch(conn: Connection) -> Callable[[], bool]:
    """Whether the service that started this run is gone: its end of the pipe closed.
    PR_SET_PDEATHSIG (die_with_parent) follows the fork server, which outlives a killed
    service by seconds (11 s on the real model, training on meanwhile beside the run that
    replaces it, towards the same checkpoints); a closed pipe is seen at once."""
    poller = select.poll()
    poller.register(conn.fileno(), 0)  # POLLERR (the reader closed) is always reported
    return lambda: bool(poller.poll(0))
