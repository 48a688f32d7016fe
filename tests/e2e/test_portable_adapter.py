"""`qatune export-base`, which writes the built-in model as plain files for an adapter's
own peft code (tests/e2e/test_exports.py loads a job's adapter on it), refuses what it
cannot write."""

import subprocess
from pathlib import Path

import pytest

from tests.conftest import prepare_data_dir, run_qatune, service_env

pytestmark = pytest.mark.slow


def test_export_base_refuses_what_it_cannot_write(tmp_path: Path, model_cache: Path) -> None:
    prepare_data_dir(tmp_path / "data", model_cache)  # the command line's: no server needed

    def export(*args: str) -> subprocess.CompletedProcess[str]:
        return run_qatune(service_env(tmp_path / "data"), "export-base", *args)

    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("mine")
    refused = export("builtin:tiny", str(tmp_path / "full"))
    assert refused.returncode == 2 and "not an empty directory" in refused.stderr
    assert export("Qwen/Qwen2.5-0.5B", str(tmp_path / "q")).returncode == 2
    assert "Unknown built-in model" in export("builtin:huge", str(tmp_path / "h")).stderr
