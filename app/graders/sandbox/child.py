"""One python grader's call, confined: `python -I -m app.graders.sandbox.child OWNER_PID`.

Reads the call as JSON on stdin, confines itself (confine.py; a protection that cannot be
applied refuses the call), then runs the grader as the first process of its own PID
namespace and waits for it, with the wall-clock limit kept here as well as by the service.
The grader writes its result into a pipe of its own; this process reads at most 64 KiB of
it, checks it (one finite number, or the grader's error), and writes one line of JSON on
the stdout it was started with: `{"outcome": {...}, "protections": [...]}`. The grader
never sees that stdout, so it cannot speak for this process; its prints go to stderr.

Outcomes: value, error (the grader's exception or a value that is not a score), late (past
the wall-clock limit), cpu (past its CPU time), signal (ended by one), ended (exited
without a result), refused (a protection could not be applied). Standard library only.
"""

import json
import math
import os
import select
import signal
import sys
import time
import traceback
from typing import Any

from app.graders.sandbox.confine import Call, Refused, confine, die_with
from app.graders.sandbox.linux import PR_SET_PDEATHSIG, prctl

RESULT_CAP = 64 * 1024


def main() -> None:
    if not sys.platform.startswith("linux"):
        _reply(sys.stdout, {"refused": "python graders run on Linux only"}, [])
        return
    owner = int(sys.argv[1])
    die_with(owner)
    started = time.monotonic()
    request = json.loads(sys.stdin.buffer.read())
    limits = request["limits"]
    reply = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the grader's prints go to stderr
    call = Call(
        owner=owner,
        root=request["root"],
        scratch=request["scratch"],
        uid=int(request["uid"]),
        without=frozenset(request["without"]),
        cpu_seconds=int(limits["cpu_seconds"]),
        memory_mb=int(limits["memory_mb"]),
        disk_mb=int(limits["disk_mb"]),
        processes=int(limits["processes"]),
    )
    try:
        held = confine(call)
    except Refused as exc:
        _reply(reply, {"refused": str(exc)}, [])
        return
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the grader: the first process of the new PID namespace
        reply.close()
        os.close(read_end)
        _grader(request, write_end)
    os.close(write_end)
    deadline = started + float(limits["wall_seconds"])
    _reply(reply, _wait(pid, read_end, deadline, call.cpu_seconds), held)


def _grader(request: dict[str, Any], result: int) -> None:
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the service's side gone: the namespace ends
        outcome = grade(request["source"], request["sample"], request["item"])
        os.write(result, json.dumps(outcome).encode())
    finally:
        os._exit(0)


def grade(source: str, sample: object, item: object) -> dict[str, object]:
    namespace: dict[str, object] = {"__name__": "grader"}
    try:
        exec(compile(source, "grader.py", "exec"), namespace)
        function = namespace.get("grade")
        if not callable(function):
            return {"error": "the source defines no function grade(sample, item)"}
        value = function(sample, item)
    except BaseException as exc:  # the grader's own fault, whatever it is
        frames = traceback.extract_tb(exc.__traceback__)
        mine = [frame for frame in frames if frame.filename == "grader.py"]
        lines = traceback.format_list(mine) + traceback.format_exception_only(type(exc), exc)
        return {"error": "".join(lines)[-4000:]}
    return checked({"value": value})


def checked(result: object) -> dict[str, object]:
    """What the grader's side wrote, as an outcome: a finite number or its error's text."""
    if isinstance(result, dict) and set(result) == {"error"} and isinstance(result["error"], str):
        return {"error": result["error"][-4000:]}
    if not isinstance(result, dict) or set(result) != {"value"}:
        return {"error": "the grader's result was not a score"}
    value = result["value"]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return {"error": f"grade() returned {type(value).__name__}, not a number"}
    if not math.isfinite(value):
        return {"error": f"grade() returned {value}, not a finite number"}
    return {"value": float(value)}


def _wait(pid: int, result: int, deadline: float, cpu_seconds: int) -> dict[str, object]:
    """The grader's outcome, or why it has none; it is killed at the deadline."""
    data, late = bytearray(), False
    poller = select.poll()
    poller.register(result, select.POLLIN)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            late = True
            break
        if not poller.poll(left * 1000):
            continue
        chunk = os.read(result, 65536)
        if not chunk:
            break
        data += chunk[: max(RESULT_CAP + 1 - len(data), 0)]
    if late:
        os.kill(pid, signal.SIGKILL)
    _, status, usage = os.wait4(pid, 0)
    if late:
        return {"late": True}
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        spent = usage.ru_utime + usage.ru_stime >= cpu_seconds - 0.05
        if number == signal.SIGXCPU or (number == signal.SIGKILL and spent):
            return {"cpu": True}
        return {"signal": number}
    if not data:
        return {"ended": os.waitstatus_to_exitcode(status)}
    if len(data) > RESULT_CAP:
        return {"error": "the grader's result was longer than 64 KiB"}
    try:
        return checked(json.loads(data))
    except (ValueError, RecursionError):
        return {"error": "the grader's result was not a score"}


def _reply(reply: Any, outcome: dict[str, object], held: list[str]) -> None:
    reply.write(json.dumps({"outcome": outcome, "protections": held}))
    reply.flush()


if __name__ == "__main__":
    main()
