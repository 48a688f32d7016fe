"""The app module itself: importing it builds nothing and leaves torch unimported."""

import subprocess
import sys

from tests.conftest import ROOT


def test_importing_the_app_leaves_torch_for_the_runtime_to_configure() -> None:
    # PYTORCH_ENABLE_MPS_FALLBACK and the MPS watermarks are read when torch is imported:
    # the Runtime sets them first, so nothing on the import path may import torch.
    check = "import sys, app.main, app.cli; print('torch' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
