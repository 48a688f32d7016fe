"""A reinforcement step's grading is bounded: a grader that never answers fails the step
with the reason (the job fails, the queue moves on), and leaves no sandbox running."""

import secrets
import time

import pytest

from app.graders.sandbox.runner import PythonSandbox, SandboxLimits
from app.graders.spec import Python
from app.graders.tools import Tools
from app.ml.training import rewards
from app.ml.training.rewards import Rewards
from app.ml.training.stops import TrainingFailed
from tests.graders.processes import gone


def test_a_grading_step_that_makes_no_progress_fails_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(rewards, "STALL_SECONDS", 1.5)
    name = "qr" + secrets.token_hex(5)
    source = (
        "import ctypes, time\n\ndef grade(sample, item):\n"
        f"    ctypes.CDLL(None).prctl(15, b'{name}', 0, 0, 0)\n    time.sleep(60)\n"
    )
    sandbox = PythonSandbox(SandboxLimits(wall_seconds=120, cpu_seconds=100))
    scoring = Rewards(Python(type="python", name="slow", source=source), Tools(sandbox=sandbox))
    started = time.monotonic()
    with pytest.raises(TrainingFailed, match="Grading made no progress") as failed:
        scoring.score(["an answer", "another"], [{}, {}])
    assert time.monotonic() - started < 10
    assert "2 of 2 still waiting" in str(failed.value)
    assert gone(name)  # the sandboxes of the grades given up on were killed
