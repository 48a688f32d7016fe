"""Fixtures: real SQLite files, a real app, a real server process, users with tokens."""

import itertools
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
import pytest

if TYPE_CHECKING:
    from fastapi.testclient import TestClient

    from app.ml.device import DevicePlan
    from app.ml.pairs import QAPair

ROOT = Path(__file__).resolve().parents[1]
QA_FILE = ROOT / "tests" / "data" / "qa30.jsonl"
ADMIN_PASSWORD = "admin-password-for-tests"


# OpenAI's string_check grader: the sampled answer is the item's answer, exactly
EXACT_ANSWER = {
    "type": "string_check",
    "name": "exact",
    "input": "{{ sample.output_text }}",
    "reference": "{{ item.answer }}",
    "operation": "eq",
}


def qa_pairs() -> list[dict[str, str]]:
    return [json.loads(line) for line in QA_FILE.read_text().splitlines() if line.strip()]


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Today's weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
SKIES = {"Paris": "sunny", "Oslo": "snowing", "Lima": "foggy", "Cairo": "hot", "Quito": "mild"}


def tool_records() -> list[dict[str, Any]]:
    """OpenAI function-calling records: for each city a call to get_weather, its result and
    the answer from it; and a question the tool cannot answer, answered without a call."""
    records: list[dict[str, Any]] = []
    for n, (city, sky) in enumerate(SKIES.items()):
        call = {"name": "get_weather", "arguments": json.dumps({"city": city})}
        messages = [
            {"role": "user", "content": f"What is the weather in {city}?"},
            {"role": "assistant", "tool_calls": [{"id": f"call_{n}", "type": "function",
                                                  "function": call}]},
            {"role": "tool", "tool_call_id": f"call_{n}", "content": json.dumps({"sky": sky})},
            {"role": "assistant", "content": f"It is {sky} in {city} today."},
        ]  # fmt: skip
        records.append({"tools": [WEATHER_TOOL], "messages": messages})
        refusal = [
            {"role": "user", "content": f"Who founded {city}?"},
            {"role": "assistant", "content": "I can only tell you the weather."},
        ]
        records.append({"tools": [WEATHER_TOOL], "messages": refusal})
    return records


def training_pairs() -> list["QAPair"]:
    """tests/data/qa30.jsonl as the trainer takes it."""
    from app.ml.pairs import QAPair

    return [QAPair(p["question"], p["answer"]) for p in qa_pairs()]


@cache
def cpu_plan() -> "DevicePlan":
    """This machine's device plan for the CPU, as a runtime would make it."""
    from app.ml.device import plan_device, probe_capabilities

    return plan_device(probe_capabilities(), "cpu")


@pytest.fixture(scope="session", autouse=True)
def quick_password_hashes() -> None:
    """argon2 at its cheapest parameters for the apps tests run in their own process: each
    test signs in and makes users, and at the shipped parameters (64 MiB, 3 passes) each
    hash or check is ~0.2 s of a core, most of an API test's time. Still argon2, verified
    as shipped; the servers the suite starts hash as shipped (and tests/core/test_security.py
    checks the shipped parameters)."""
    from argon2 import PasswordHasher, profiles

    from app.core import security

    security._hasher = PasswordHasher.from_parameters(profiles.CHEAPEST)


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One built-in model for the whole run; every data dir links to it."""
    from app.ml.builtin import ensure_builtin_model

    cache = tmp_path_factory.mktemp("models")
    ensure_builtin_model(cache)
    return cache


# The real model, read from its GGUF once for every run of the suite on this machine (30 s
# on 2 cores), as the service reads it, and linked into the run's model cache.
REAL_MODEL_CACHE = Path.home() / ".cache" / "qatune" / "test-models"


def real_model_dir(model_cache: Path) -> Path:
    """The real model's weights as this machine serves them, read into REAL_MODEL_CACHE
    once (ModelUnavailable where they cannot be)."""
    from app.core.names import SMOLLM2
    from app.ml.device_benchmark import plan_this_machine
    from app.ml.models import resolve_model_dir

    precision = plan_this_machine("auto", model_cache).precision
    return resolve_model_dir(SMOLLM2, cache_dir=REAL_MODEL_CACHE, offline=True, precision=precision)


@pytest.fixture(scope="session")
def real_model(model_cache: Path) -> str:
    """smollm2-135m-instruct in the run's model cache (skipped where it is not installed:
    `make setup` installs it from the package registry)."""
    from app.core.names import SMOLLM2
    from app.ml.models import ModelUnavailable
    from app.ml.packaged import installed

    if not installed(SMOLLM2):
        pytest.skip(f"{SMOLLM2} is not installed (make setup installs it)")
    try:
        kept = real_model_dir(model_cache)
    except ModelUnavailable as exc:
        pytest.skip(str(exc))
    link = model_cache / kept.name
    if not link.exists():
        link.symlink_to(kept)
    return SMOLLM2


# Qwen2.5-Instruct's way of writing tools, calls and results (its default system prompt left
# out): a base whose template renders tools, as the built-in model's does not
TOOLS_TEMPLATE = ROOT / "tests" / "data" / "chat_templates" / "qwen2_5_tools.jinja"


@pytest.fixture(scope="session")
def tool_model(model_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built-in model's weights with a chat template that writes tools: a server path."""
    from app.ml.builtin import builtin_dir
    from app.ml.models import load_tokenizer

    target = tmp_path_factory.mktemp("tool-model") / "tiny-tools"
    shutil.copytree(builtin_dir(model_cache), target)
    tokenizer = load_tokenizer(target)
    tokenizer.chat_template = TOOLS_TEMPLATE.read_text()
    tokenizer.save_pretrained(target)
    return target


def prepare_data_dir(data_dir: Path, model_cache: Path) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    if not (data_dir / "models").exists():
        (data_dir / "models").symlink_to(model_cache)


def service_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QATUNE_")}
    env.update(
        QATUNE_DATA_DIR=str(data_dir),
        QATUNE_LOG_DIR=str(data_dir / "logs"),
        QATUNE_ADMIN_PASSWORD=ADMIN_PASSWORD,
        QATUNE_OFFLINE="true",
        # The tests train the built-in model (seconds); those of the real one name it.
        QATUNE_DEFAULT_BASE_MODEL="builtin:tiny",
        QATUNE_HEARTBEAT_SECONDS="1",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


# ------------------------------------------------------------------ in-process app
@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """One PostgreSQL server for the run (tests/postgres.py); each test gets a database."""
    from tests.postgres import postgres_server, unavailable

    why = unavailable()
    if why:
        pytest.skip(f"no PostgreSQL server for these tests: {why}")
    with postgres_server(free_port()) as url:
        yield url


@pytest.fixture(scope="session")
def postgres_template(postgres_url: str) -> str:
    """A database with every migration applied, that each test's database is a copy of
    (CREATE DATABASE … TEMPLATE: milliseconds, where migrating took most of a second)."""
    from app.db.session import Database
    from tests.postgres import fresh_database

    url = fresh_database(postgres_url)
    database = Database(url)
    database.migrate()
    database.dispose()  # a template may have no open connection
    return url.rsplit("/", 1)[1]


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database file with every migration applied, copied for each test's data dir."""
    from app.db.session import Database

    path = tmp_path_factory.mktemp("sqlite-template") / "qatune.db"
    database = Database(f"sqlite:///{path}")
    database.migrate()
    database.dispose()
    return path


# The databases in-process tests run on: both, but for the inner loop (make test-fast), which
# starts no server process, PostgreSQL's included.
DATABASES = os.environ.get("QATUNE_TEST_DATABASES", "sqlite,postgresql").split(",")


@pytest.fixture(params=DATABASES)
def database_url(request: pytest.FixtureRequest) -> str | None:
    """Every in-process API test runs on both databases, each a migrated copy; None: the
    default SQLite file in the data dir."""
    if request.param == "sqlite":
        return None
    from tests.postgres import fresh_database

    template = request.getfixturevalue("postgres_template")
    return fresh_database(request.getfixturevalue("postgres_url"), template=template)


@pytest.fixture
def sqlite_only(database_url: str | None) -> None:
    """For a test about the SQLite file itself (its mode, its write lock)."""
    if database_url is not None:
        pytest.skip("about the SQLite file; PostgreSQL has none")


@pytest.fixture
def app_env(
    tmp_path: Path,
    model_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    database_url: str | None,
    sqlite_template: Path,
) -> Path:
    data_dir = tmp_path / "data"
    prepare_data_dir(data_dir, model_cache)
    if database_url is None:
        shutil.copyfile(sqlite_template, data_dir / "qatune.db")
    extra = {"QATUNE_DATABASE_URL": database_url} if database_url else {}
    for key, value in service_env(data_dir, QATUNE_EMBEDDED_WORKER="false", **extra).items():
        if key.startswith("QATUNE_"):
            monkeypatch.setenv(key, value)
    return data_dir


@pytest.fixture
def client(app_env: Path) -> Iterator["TestClient"]:
    from fastapi.testclient import TestClient

    from app.core.config import Settings
    from app.main import create_app

    with TestClient(create_app(Settings())) as test_client:
        yield test_client


def login(client: "TestClient", username: str, password: str) -> dict[str, str]:
    response = client.post("/auth/token", data={"username": username, "password": password})
    assert response.status_code == 200, response.text
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


@pytest.fixture
def admin_headers(client: "TestClient") -> dict[str, str]:
    return login(client, "admin", ADMIN_PASSWORD)


def make_user(client: "TestClient", admin: dict[str, str], name: str) -> dict[str, str]:
    response = client.post(
        "/users", json={"username": name, "password": f"{name}-kettle-marble-57"}, headers=admin
    )
    assert response.status_code == 201, response.text
    return login(client, name, f"{name}-kettle-marble-57")


@pytest.fixture
def alice(client: "TestClient", admin_headers: dict[str, str]) -> dict[str, str]:
    return make_user(client, admin_headers, "alice")


@pytest.fixture
def bob(client: "TestClient", admin_headers: dict[str, str]) -> dict[str, str]:
    return make_user(client, admin_headers, "bob")


# ------------------------------------------------------------------ a real server
def run_qatune(
    env: dict[str, str], *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """`qatune ARGS…` run to its end, as a user runs it, with these settings."""
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    url: str
    data_dir: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    open_files: int | None = None  # the process's descriptor limit, if lowered

    def start(self) -> None:
        port = self.url.rsplit(":", 1)[1]
        log = (self.data_dir / "server.out").open("ab")
        limit = self.open_files
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", port],
            env=self.env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=(lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)))
            if limit
            else None,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited: {self.output()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"server did not start: {self.output()[-3000:]}")

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def output(self) -> str:
        return (self.data_dir / "server.out").read_text(errors="replace")

    def client(self, headers: dict[str, str] | None = None) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=headers or {}, timeout=60)


def start_server(data_dir: Path, model_cache: Path, **env: str) -> Server:
    """A server on `data_dir` with extra QATUNE_* settings, answering; one that does not
    start is stopped before the error is raised."""
    prepare_data_dir(data_dir, model_cache)
    running = Server(f"http://127.0.0.1:{free_port()}", data_dir, service_env(data_dir, **env))
    try:
        try:
            running.start()
        except RuntimeError:
            # The port was free when chosen; a test running beside this one may have taken
            # it since (for a connection of its own). Once more, on another.
            if "address already in use" not in running.output():
                raise
            running.url = f"http://127.0.0.1:{free_port()}"
            running.start()
    except RuntimeError:
        running.stop()
        raise
    return running


@pytest.fixture
def make_server(tmp_path: Path, model_cache: Path) -> Iterator[Callable[..., Server]]:
    """Start servers with extra QATUNE_* settings; all are stopped after the test."""
    started: list[Server] = []

    def make(**env: str) -> Server:
        data_dir = tmp_path / ("data" if not started else f"data{len(started)}")
        started.append(start_server(data_dir, model_cache, **env))
        return started[-1]

    yield make
    for running in started:
        running.stop()


@pytest.fixture
def server(make_server: Callable[..., Server]) -> Server:
    return make_server()


@pytest.fixture(scope="session")
def shared_server(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> Iterator[Server]:
    """One server with the default settings for each test process, for the tests that add
    only their own users' things and look at nothing else (users named by `unique`): a
    start and its fork server's imports are ~14 s of a core, a third of a short test."""
    running = start_server(tmp_path_factory.mktemp("shared") / "data", model_cache)
    yield running
    running.stop()


_unique = itertools.count(1)


def unique(name: str) -> str:
    """`name` with a number no other test in this process gets: a user of shared_server."""
    return f"{name}{next(_unique)}"


def login_over_http(
    server: Server, username: str = "admin", password: str = ADMIN_PASSWORD
) -> dict[str, str]:
    response = httpx.post(
        f"{server.url}/auth/token", data={"username": username, "password": password}, timeout=30
    )
    assert response.status_code == 200, response.text
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


def make_user_over_http(server: Server, admin: dict[str, str], name: str) -> dict[str, str]:
    """A new user (password `{name}-kettle-marble-57`), signed in: their headers."""
    made = httpx.post(
        f"{server.url}/users",
        json={"username": name, "password": f"{name}-kettle-marble-57"},
        headers=admin,
        timeout=30,
    )
    assert made.status_code == 201, made.text
    return login_over_http(server, name, f"{name}-kettle-marble-57")


T = TypeVar("T")
R = TypeVar("R")


def together(ask: Callable[[T], R], items: Iterable[T], at_once: int = 8) -> list[R]:
    """`ask` for each item, `at_once` in flight, as many users would ask: the server decodes
    the concurrent questions in one batch (up to QATUNE_SERVE_MAX_BATCH), a fraction of the
    machine's time one at a time takes. The results in the items' order."""
    with ThreadPoolExecutor(at_once) as pool:
        return list(pool.map(ask, items))


def answers(client: httpx.Client, job_id: int, questions: list[str]) -> list[str]:
    """The job's model's answers to `questions` through POST /jobs/{id}/query, asked
    `together`, in the questions' order."""

    def ask(question: str) -> str:
        reply = client.post(f"/jobs/{job_id}/query", json={"question": question})
        assert reply.status_code == 200, reply.text
        return str(reply.json()["answer"])

    return together(ask, questions)


def wait_for_status(
    client: httpx.Client, job_id: int, statuses: set[str], timeout: float = 240
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = client.get(f"/jobs/{job_id}")
        assert response.status_code == 200, f"GET /jobs/{job_id}: {response.text}"
        job: dict[str, Any] = response.json()
        if job["status"] in statuses:
            return job
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} not in {statuses} after {timeout}s: {job}")


# The longest files first: the suite runs two tests at a time (scripts/test.sh), and a long
# test left for the end keeps one worker busy while the other has nothing to do.
LONGEST_FIRST = (  # by the time each file's tests took in a full run (~15 s and over)
    "e2e/test_service.py",
    "reliability/test_crashes.py",
    "ui/test_admin_ui.py",
    "e2e/test_readme.py",
    "reliability/test_schemathesis.py",
    "e2e/test_ray_executor.py",
    "ml/training/test_reinforcement.py",
    "e2e/test_exports.py",
    "e2e/test_openai_tools.py",
    "e2e/test_auto_learns.py",
    "reliability/test_bodies_and_sign_in.py",
    "e2e/test_openai_chat.py",
    "reliability/test_backups.py",
    "e2e/test_openai_conversations.py",
    "worker/test_supervisor.py",
    "e2e/test_openai_client.py",
    "reliability/test_disk_full.py",
    "ml/training/test_data_parallel.py",
    "reliability/test_shutdown.py",
    "e2e/test_memory.py",
    "ml/training/test_quantized.py",
    "e2e/test_graders.py",
    "e2e/test_lineage.py",
    "reliability/test_slow_clients.py",
    "reliability/test_streams.py",
    "ml/serving/test_engine.py",
    "ml/training/test_checkpoints.py",
    "reliability/test_shared_engines.py",
    "ui/test_languages.py",
    "api/test_graders.py",
    "ml/test_packing.py",
    "e2e/test_operations.py",
    "graders/test_python_sandbox.py",
    "worker/test_local.py",
    "api/test_jobs.py",
    "ml/training/test_trainer.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.path.relative_to(ROOT / "tests").as_posix()
        return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: within a file, and among the rest, the order is kept
