"""docker-compose.yml as Compose reads it: one container by default, PostgreSQL, a Ray head
and GPU nodes with the `scale` profile. No Docker engine runs here: this checks the file
(Debian's docker-compose parses and interpolates it), not the containers."""

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")
ROOT = Path(__file__).resolve().parents[1]
COMPOSE = shutil.which("docker-compose")
pytestmark = pytest.mark.skipif(
    COMPOSE is None, reason="docker-compose is not installed (scripts/test.sh installs Debian's)"
)


def config(*args: str) -> dict[str, Any]:
    assert COMPOSE is not None
    done = subprocess.run(
        [COMPOSE, "--project-directory", str(ROOT), "-f", "docker-compose.yml", *args, "config"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},  # nothing from the caller's environment leaks in
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    parsed: dict[str, Any] = yaml.safe_load(done.stdout)
    return parsed


def test_by_default_one_container_with_sqlite_and_the_local_executor() -> None:
    services = config()["services"]
    always = {name for name, service in services.items() if not service.get("profiles")}
    assert always == {"api"}
    env = services["api"]["environment"]
    assert env["QATUNE_EXECUTOR"] == "local"
    assert not env["QATUNE_DATABASE_URL"]  # unset: SQLite in the data volume


def test_the_scale_profile_adds_postgres_a_ray_head_and_gpu_nodes() -> None:
    services = config("--env-file", "docs/scale.env.example", "--profile", "scale")["services"]
    assert set(services) == {"api", "postgres", "ray-head", "ray-gpu"}
    api = services["api"]["environment"]
    assert api["QATUNE_EXECUTOR"] == "ray"
    assert api["QATUNE_RAY_ADDRESS"] == "ray://ray-head:10001"
    assert api["QATUNE_DATABASE_URL"].startswith("postgresql+psycopg://qatune:")
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"]
    head = services["ray-head"]["command"]
    assert "--head" in head and "--num-cpus=0" in head  # the head trains nothing
    gpu = services["ray-gpu"]
    assert '--resources={"qatune_slot": 1}' in gpu["command"]
    (device,) = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
    # Its own model cache, no disk shared with the API (short or long volume syntax).
    (volume,) = [str(v) for v in gpu["volumes"]]
    assert "qatune-node-data" in volume and "/data" in volume


def test_the_gpu_override_still_applies() -> None:
    services = config("-f", "docker-compose.gpu.yml")["services"]
    assert services["api"]["deploy"]["resources"]["reservations"]["devices"]
