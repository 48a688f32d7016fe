"""Slow and greedy clients cost nothing: a request head or body that trickles in is cut
off with a 408, one address holds a bounded number of connections, and /health answers
while an attacker holds more connections than the process has descriptors."""

import asyncio
import resource
import socket
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.conftest import Server, free_port, prepare_data_dir, service_env

pytestmark = pytest.mark.slow
TIMEOUT_S = 2.0  # QATUNE_HEADER_TIMEOUT_SECONDS and QATUNE_BODY_TIMEOUT_SECONDS here
ATTACK = 600  # connections from one address, against a descriptor limit of 256
OPEN_FILES = 256
PER_SOURCE = 64  # half of the 128 connections such a server holds: one address's ceiling


@pytest.fixture
def strict(make_server: Callable[..., Server]) -> Server:
    timeout = str(TIMEOUT_S)
    return make_server(QATUNE_HEADER_TIMEOUT_SECONDS=timeout, QATUNE_BODY_TIMEOUT_SECONDS=timeout)


def connect(server: Server, source: str = "127.0.0.1") -> socket.socket:
    host, port = server.url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.bind((source, 0))  # any 127.x address is this host: another client address
    sock.connect((host, int(port)))
    return sock


def trickle(sock: socket.socket, limit_s: float) -> tuple[bytes, float]:
    """Send a byte every half second until the server answers or closes: what it said,
    and after how long."""
    started, answer = time.monotonic(), b""
    sock.settimeout(0.5)
    while time.monotonic() - started < limit_s:
        try:
            sock.sendall(b"X")
            data = sock.recv(4096)
        except TimeoutError:
            continue
        except OSError:
            break
        answer += data
        if not data:
            break
    return answer, time.monotonic() - started


def test_a_head_that_trickles_in_is_cut_off(strict: Server) -> None:
    with connect(strict) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: qatune\r\nX-Slow: ")
        answer, took = trickle(sock, TIMEOUT_S + 10)
    print(f"\na head sent a byte each 0.5 s: {answer[:12]!r} after {took:.1f} s")
    assert answer.startswith(b"HTTP/1.1 408") and took < TIMEOUT_S + 1.5


def test_a_body_that_stops_is_cut_off(strict: Server) -> None:
    with connect(strict) as sock:
        sock.sendall(
            b"POST /auth/token HTTP/1.1\r\nHost: qatune\r\nContent-Length: 100\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\n\r\nusername=a"
        )
        sock.settimeout(TIMEOUT_S + 10)
        started = time.monotonic()
        answer = sock.recv(4096)
        took = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408") and took < TIMEOUT_S + 1.5, (answer, took)


def test_one_address_holds_64_connections_and_health_answers_at_the_descriptor_limit(
    tmp_path: Path, model_cache: Path
) -> None:
    with few_descriptors(tmp_path / "data", model_cache, header_timeout_s=3) as server:
        attack_one_address(server)


def attack_one_address(server: Server) -> None:
    attack: list[socket.socket] = []
    try:
        for _ in range(ATTACK):  # slowloris from 127.0.0.2: heads that never end
            sock = connect(server, "127.0.0.2")
            sock.sendall(b"GET /health HTTP/1.1\r\n")
            attack.append(sock)
        time.sleep(1.0)
        health = [httpx.get(f"{server.url}/health", timeout=5).status_code for _ in range(10)]
        answers = [answer_of(sock) for sock in attack]
        held = answers.count(None)
        print(f"\n{ATTACK} slow connections from one address: {held} held, /health {health}")
        assert health == [200] * 10
        assert held == PER_SOURCE
        refused = [a for a in answers if a is not None]  # answered in HTTP, not just closed
        assert len(refused) == ATTACK - PER_SOURCE
        assert all(a.startswith(b"HTTP/1.1 429") and b"retry-after: 1" in a for a in refused)
        time.sleep(3.5)  # past the head's timeout: the held ones are closed too
        assert sum(is_open(sock) for sock in attack) == 0
    finally:
        for sock in attack:
            sock.close()


def test_many_addresses_cannot_fill_the_server_and_health_still_answers(
    tmp_path: Path, model_cache: Path
) -> None:
    """20 addresses x 64 slow connections against 256 descriptors: the server holds half
    its descriptors' worth, keeps a band for probes, answers the rest 503 at once."""
    with few_descriptors(tmp_path / "data", model_cache, header_timeout_s=5) as server:
        attack_many_addresses(server)


def attack_many_addresses(server: Server) -> None:
    attack: list[socket.socket] = []
    try:
        for n in range(20 * PER_SOURCE):
            sock = connect(server, f"127.0.1.{n % 20 + 1}")
            sock.sendall(b"GET /jobs HTTP/1.1\r\n")
            attack.append(sock)
        time.sleep(1.0)
        health = [httpx.get(f"{server.url}/health", timeout=5).status_code for _ in range(10)]
        other = httpx.get(f"{server.url}/models", timeout=5)
        answers = [answer_of(sock) for sock in attack]
        held = answers.count(None)
        refused = [a for a in answers if a is not None]
        print(f"\n{len(attack)} slow connections from 20 addresses: {held} held, "
              f"/health {health}, another path {other.status_code}")  # fmt: skip
        assert health == [200] * 10
        assert held == OPEN_FILES // 2  # QATUNE_MAX_CONNECTIONS's default: half the limit
        assert refused and all(a.startswith(b"HTTP/1.1 503") for a in refused)
        assert other.status_code == 503 and other.headers["retry-after"] == "1"
    finally:
        for sock in attack:
            sock.close()


def test_a_burst_past_the_address_cap_is_told_429_not_reset(
    make_server: Callable[..., Server],
) -> None:
    """A script's 200 requests at once from an address already at its cap: each is answered
    429 in HTTP (before: past 64 refusals at once, the connection was closed before the
    request was read, and the client saw a reset, not why)."""
    server = make_server(QATUNE_MAX_CONNECTIONS_PER_SOURCE="16")
    held = [connect(server, "127.0.0.3") for _ in range(16)]
    for sock in held:
        sock.sendall(b"GET /health HTTP/1.1\r\n")  # heads that have not ended

    async def burst() -> list[int | str]:
        transport = httpx.AsyncHTTPTransport(
            local_address="127.0.0.3", limits=httpx.Limits(max_connections=300)
        )
        async with httpx.AsyncClient(transport=transport, timeout=30) as client:

            async def one() -> int | str:
                try:
                    response = await client.get(f"{server.url}/health")
                except httpx.TransportError as exc:
                    return repr(exc)
                return response.status_code

            return await asyncio.gather(*(one() for _ in range(200)))

    try:
        answers = asyncio.run(burst())
    finally:
        for sock in held:
            sock.close()
    print(f"\n200 requests past the cap: {Counter(answers)}")
    assert answers == [429] * 200


def test_an_idle_connection_is_kept_past_the_clients_own_keep_alive(shared_server: Server) -> None:
    """httpx (and so the official openai client) drops an idle connection after 5 s; a
    server that closes it after the same 5 s races the client's next request on it."""
    with connect(shared_server) as sock:
        sock.settimeout(10)
        request = b"GET /health HTTP/1.1\r\nHost: qatune\r\n\r\n"
        sock.sendall(request)
        assert whole_response(sock).startswith(b"HTTP/1.1 200")
        time.sleep(6)
        sock.sendall(request)
        assert whole_response(sock).startswith(b"HTTP/1.1 200")


def whole_response(sock: socket.socket) -> bytes:
    """One response, head and body (they may come in two reads): what is left of it would
    be read as the start of the next one."""
    said = b""
    while b"\r\n\r\n" not in said:
        if not (data := sock.recv(4096)):
            return said
        said += data
    head, _, body = said.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.lower().split(b"\r\n")
        if line.startswith(b"content-length:")
    )
    while len(body) < length and (data := sock.recv(4096)):
        body += data
    return head + b"\r\n\r\n" + body


@contextmanager
def few_descriptors(data_dir: Path, model_cache: Path, header_timeout_s: int) -> Iterator[Server]:
    """A server limited to OPEN_FILES descriptors, while this process may open enough
    sockets to attack it (its own limit raised, and put back after)."""
    prepare_data_dir(data_dir, model_cache)
    env = service_env(data_dir, QATUNE_HEADER_TIMEOUT_SECONDS=str(header_timeout_s))
    server = Server(f"http://127.0.0.1:{free_port()}", data_dir, env, open_files=OPEN_FILES)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    try:
        server.start()
        yield server
    finally:
        server.stop()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def answer_of(sock: socket.socket) -> bytes | None:
    """None while the server holds the connection; else what it said before closing."""
    sock.setblocking(False)
    said = b""
    try:
        while data := sock.recv(4096):
            said += data
        return said
    except BlockingIOError:
        return said or None
    except OSError:
        return said


def is_open(sock: socket.socket) -> bool:
    """Whether the server still holds this connection (nothing to read, and no end)."""
    sock.setblocking(False)
    try:
        while data := sock.recv(4096):  # a 408 may be waiting before the end
            del data
        return False
    except BlockingIOError:
        return True
    except OSError:  # reset: closed at once
        return False
