"""`qatune device --benchmark`: time a few training steps on each device, keep the winner."""

import json
from pathlib import Path
from typing import Any

RESULT_FILE = "device_benchmark.json"


def load_benchmark(data_dir: Path) -> dict[str, Any] | None:
    path = data_dir / RESULT_FILE
    if not path.exists():
        return None
    try:
        result: dict[str, Any] = json.loads(path.read_text())
        return result
    except (OSError, json.JSONDecodeError):
        return None
