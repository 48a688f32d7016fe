"""Training and serving keep their threads off the cores other programs use, and take them
back."""

import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

from app.ml.builtin import BUILTIN_TINY
from app.ml.cpu_share import SAMPLE_EVERY_S, CpuShare, threads_for
from app.ml.query_service import QueryService
from tests.conftest import cpu_plan
from tests.ml.serving.test_engine import ask


def test_threads_leave_the_busy_cores() -> None:
    assert threads_for(0.0, logical=2, physical=2) == 2
    assert threads_for(0.2, logical=2, physical=2) == 2  # a browser tab: keep both
    assert threads_for(1.0, logical=2, physical=2) == 1
    assert threads_for(2.0, logical=2, physical=2) == 1  # never none
    assert threads_for(3.0, logical=8, physical=8) == 5
    assert threads_for(3.0, logical=16, physical=8) == 8  # SMT siblings take co-tenants


@pytest.mark.serial  # it counts what other programs use: no other test may run beside it
@pytest.mark.skipif((psutil.cpu_count(logical=False) or 1) < 2, reason="needs two cores")
def test_a_busy_core_takes_a_thread_away_until_it_goes() -> None:
    before = torch.get_num_threads()
    share = CpuShare(psutil.cpu_count(logical=False) or 1)
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(SAMPLE_EVERY_S + 0.3)
        assert share.adjust()
        assert 0.7 < share.others_cores < 1.6, share.others_cores
        assert share.threads == threads_for(share.others_cores, share.logical, share.physical)
        assert share.threads < share.physical or share.logical > share.physical
        assert torch.get_num_threads() == share.threads
    finally:
        spin.kill()
        spin.wait()
    time.sleep(SAMPLE_EVERY_S + 0.1)
    assert not share.adjust()  # one quiet second is not enough to take a core back
    for _ in range(5):  # the next quiet one is (a few more if something else ran meanwhile)
        time.sleep(SAMPLE_EVERY_S + 0.1)
        share.adjust()
        if share.threads == share.physical:
            break
    assert share.threads == share.physical, share.others_cores
    torch.set_num_threads(before)


@pytest.mark.serial  # it counts what other programs use: no other test may run beside it
@pytest.mark.skipif((psutil.cpu_count(logical=False) or 1) < 2, reason="needs two cores")
def test_the_service_engine_gives_a_busy_core_up_and_takes_it_back(model_cache: Path) -> None:
    service = QueryService(device_plan=cpu_plan(), model_cache_dir=model_cache, offline=True)
    engine = service.builtin_engine(BUILTIN_TINY)

    def threads_while_answering(expected: int, within_s: float) -> int:
        """Answers until the engine's thread count is `expected` or `within_s` has passed: a
        step re-measures at most once a second, and a machine shared with other programs
        (a CI runner) may need a few quiet seconds before a core counts as free again."""
        deadline = time.monotonic() + within_s
        threads = int(engine.call(torch.get_num_threads))
        while threads != expected and time.monotonic() < deadline:
            ask(engine, "What is qatune?", max_tokens=32).wait()
            threads = int(engine.call(torch.get_num_threads))  # the engine thread's own count
        return threads

    cores = cpu_plan().capabilities.cpu_count
    try:
        assert threads_while_answering(cores, 10 * SAMPLE_EVERY_S) == cores
        spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            time.sleep(0.5)
            assert threads_while_answering(1, 10 * SAMPLE_EVERY_S) == 1
        finally:
            spin.kill()
            spin.wait()
        assert threads_while_answering(cores, 15 * SAMPLE_EVERY_S) == cores
    finally:
        service.drop_cached()
