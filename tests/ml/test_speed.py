"""The matrix speed an estimate starts from: probed on the cores a job would get now, and
probed again once it is old."""

import subprocess
import sys
import time

import psutil
import pytest

from app.ml import speed


@pytest.mark.skipif((psutil.cpu_count() or 1) > 8, reason="one busy core is too small a share")
def test_a_busy_core_is_left_out_of_the_probe() -> None:
    cores = psutil.cpu_count() or 1
    spinning = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        assert speed.threads_free(cores) <= max(1, cores - 1)
    finally:
        spinning.kill()
        spinning.wait()


def test_an_old_probe_is_taken_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(speed, "_measured", {2: (time.monotonic(), 1.0)})
    assert speed.cpu_gflops(2) == 1.0  # fresh: kept
    monkeypatch.setattr(speed, "_measured", {2: (time.monotonic() - speed.REFRESH_S - 1, 1.0)})
    assert speed.cpu_gflops(2) > 1.0  # old: measured again (a real CPU does GFLOP/s)
