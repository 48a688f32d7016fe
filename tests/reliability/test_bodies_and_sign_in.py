"""Hostile uploads and password guessing against a real server, over raw sockets."""

import math
import select
import socket
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from app.core.proof_of_work import FREE_FAILURES, bits_needed, solve
from tests.conftest import ADMIN_PASSWORD, Server

pytestmark = pytest.mark.slow
MIB = 1024 * 1024


def raw_upload(
    server: Server, *, token: str | None, length: int | None, send: int
) -> tuple[int, int]:
    """POST /datasets, sending up to `send` bytes of body; stops at the server's answer.

    Returns (status, bytes sent before the answer came)."""
    host, port = server.url.removeprefix("http://").split(":")
    headers = [
        "POST /datasets HTTP/1.1",
        f"Host: {host}",
        "Content-Type: multipart/form-data; boundary=qq",
        "Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}",
    ]
    if token:
        headers.append(f"Authorization: Bearer {token}")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(("\r\n".join(headers) + "\r\n\r\n").encode())
        chunk = b"--qq\r\nContent-Disposition: form-data; name=file; filename=q.jsonl\r\n\r\n"
        chunk += b'{"question": "q", "answer": "a"}\n' * (MIB // 33)
        sent = 0
        while sent < send:
            ready, _, _ = select.select([sock], [], [], 0)
            if ready:
                break
            body = chunk if length is not None else b"%x\r\n%s\r\n" % (len(chunk), chunk)
            try:
                sock.sendall(body)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(chunk)
        sock.settimeout(30)
        status_line = sock.recv(200).split(b"\r\n", 1)[0]
    return int(status_line.split()[1]), sent


def tmp_bytes(tmp: Path) -> int:
    return sum(p.stat().st_size for p in tmp.rglob("*") if p.is_file())


@pytest.fixture
def guarded(make_server: Callable[..., Server], tmp_path: Path) -> tuple[Server, Path, str]:
    spool = tmp_path / "server-tmp"  # where the server would spool uploads
    spool.mkdir()
    server = make_server(TMPDIR=str(spool), QATUNE_MAX_UPLOAD_MB="20")
    token = httpx.post(
        f"{server.url}/auth/token", data={"username": "admin", "password": ADMIN_PASSWORD}
    ).json()["access_token"]
    return server, spool, token


def test_an_unsigned_gigabyte_is_refused_before_it_is_stored(
    guarded: tuple[Server, Path, str],
) -> None:
    server, spool, _ = guarded
    status, sent = raw_upload(server, token=None, length=None, send=1024 * MIB)
    print(f"\nunsigned chunked upload: {status} after {sent / MIB:.0f} MiB sent of 1 GiB")
    assert status == 401 and sent < 64 * MIB
    assert tmp_bytes(spool) == 0


def test_a_declared_length_over_the_limit_is_refused_at_once(
    guarded: tuple[Server, Path, str],
) -> None:
    server, spool, token = guarded
    started = time.monotonic()
    status, sent = raw_upload(server, token=token, length=200 * MIB, send=0)
    print(f"\nContent-Length 200 MB: {status} in {time.monotonic() - started:.3f} s, 0 bytes sent")
    assert status == 413 and sent == 0
    assert tmp_bytes(spool) == 0


def test_a_signed_chunked_upload_is_cut_at_the_limit(guarded: tuple[Server, Path, str]) -> None:
    server, spool, token = guarded
    status, sent = raw_upload(server, token=token, length=None, send=200 * MIB)
    print(f"\nsigned chunked upload: {status} after {sent / MIB:.0f} MiB sent of 200 MiB")
    assert status == 413 and sent < 64 * MIB
    time.sleep(1)  # the request's spooled parts are gone with it
    assert tmp_bytes(spool) < 21 * MIB


@pytest.fixture
def behind_a_proxy(make_server: Callable[..., Server]) -> Server:
    """The service behind a reverse proxy on this host, whose X-Forwarded-For it believes."""
    return make_server(QATUNE_TRUSTED_PROXIES="127.0.0.1")


def sign_in(
    client: httpx.Client, password: str, address: str | None = None, *, work: bool = False
) -> httpx.Response:
    """POST /auth/token as admin from `address`; with `work`, a proof of work asked for is
    found and sent along, as the admin UI does."""
    data = {"username": "admin", "password": password}
    headers = {"X-Forwarded-For": address} if address else {}
    response = client.post("/auth/token", data=data, headers=headers)
    challenge = response.headers.get("X-Qatune-Challenge")
    if work and response.status_code == 429 and challenge:
        proof = solve(challenge, int(response.headers["X-Qatune-Work-Bits"]))
        response = client.post(
            "/auth/token", data={**data, "challenge": challenge, "proof": proof}, headers=headers
        )
    return response


def test_guessing_the_admin_password_is_throttled_and_the_owner_is_not_locked_out(
    behind_a_proxy: Server,
) -> None:
    statuses: dict[int, int] = {}
    started = time.monotonic()
    with httpx.Client(base_url=behind_a_proxy.url, timeout=30) as client:
        for guess in range(200):
            response = sign_in(client, f"guess-{guess}")
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        took = time.monotonic() - started
        print(f"\n200 wrong admin passwords in {took:.1f} s: {statuses}")
        # 5 free tries, then waits of 1, 2, 4... s: a slow run may see a wait or two end.
        assert statuses.get(401, 0) <= 6 + math.floor(math.log2(took + 1)), statuses
        # The owner, from elsewhere: the guesses that were answered at all are few.
        owner = sign_in(client, ADMIN_PASSWORD, "192.0.2.10", work=True)
        assert owner.status_code == 200, owner.text


def test_guesses_from_a_new_address_each_time_cost_work_and_never_keep_the_owner_out(
    behind_a_proxy: Server,
) -> None:
    """The attack: each guess from another address (a proxy passing X-Forwarded-For on, or
    a botnet); the owner signs in from home throughout, mistyping once."""
    owner: list[int] = []
    guessed: dict[int, int] = {}
    with httpx.Client(base_url=behind_a_proxy.url, timeout=30) as client:
        for guess in range(120):
            address = f"10.0.{guess // 250}.{guess % 250 + 1}"
            response = sign_in(client, f"guess-{guess}", address)
            guessed[response.status_code] = guessed.get(response.status_code, 0) + 1
            if guess % 10 == 9:
                owner.append(sign_in(client, ADMIN_PASSWORD, "192.0.2.10", work=True).status_code)
        print(f"\n120 guesses from 120 addresses, no work: {guessed}; the owner: {owner}")
        # Only the account's free failures were checked at all; the rest were asked for work.
        assert guessed == {401: FREE_FAILURES, 429: 120 - FREE_FAILURES}, guessed
        assert owner == [200] * 12
        # A guess that pays is checked, and makes the next ones dearer.
        paid = [sign_in(client, f"paid-{n}", f"10.9.0.{n + 1}", work=True) for n in range(10)]
        assert [r.status_code for r in paid] == [401] * 10
        asked = sign_in(client, "unpaid", "10.9.1.1")
        assert int(asked.headers["X-Qatune-Work-Bits"]) == bits_needed(FREE_FAILURES + 10) == 17
        # The owner mistypes once during all this: one 401, then in at once, no wait.
        typo = sign_in(client, "admin-password-for-test", "192.0.2.10", work=True)
        assert typo.status_code == 401, typo.text
        assert sign_in(client, ADMIN_PASSWORD, "192.0.2.10", work=True).status_code == 200


def test_forwarded_addresses_are_not_believed_unless_a_proxy_is_trusted(server: Server) -> None:
    """By default the peer is the client: a made-up X-Forwarded-For dodges nothing."""
    with httpx.Client(base_url=server.url, timeout=30) as client:
        statuses = [
            sign_in(client, f"guess-{guess}", f"10.1.0.{guess + 1}").status_code
            for guess in range(10)
        ]
    assert statuses[:5] == [401] * 5 and set(statuses[6:]) == {429}, statuses


def raw_answer(server: Server, head: list[str]) -> bytes:
    """The whole answer to a request whose head is sent byte for byte (latin-1), as no
    client library would send it."""
    host, port = server.url.removeprefix("http://").split(":")
    head = [*head, f"Host: {host}", "Connection: close"]
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_a_header_number_in_digits_other_than_0_to_9_is_no_number(server: Server) -> None:
    """ "²" passes str.isdigit and fails int(): a reconnecting log stream got a 500."""
    token = httpx.post(
        f"{server.url}/auth/token", data={"username": "admin", "password": ADMIN_PASSWORD}
    ).json()["access_token"]
    with server.client({"Authorization": f"Bearer {token}"}) as api:
        made = api.post("/jobs", json={"qa_pairs": [{"question": "q?", "answer": "a."}]})
        job_id = made.json()["id"]
        assert api.post(f"/jobs/{job_id}/cancel").status_code == 200
    signed = f"Authorization: Bearer {token}"
    for seen in ("²", "¹"):
        stream = raw_answer(
            server, [f"GET /jobs/{job_id}/logs/stream HTTP/1.1", signed, f"Last-Event-ID: {seen}"]
        )
        assert stream.startswith(b"HTTP/1.1 200"), stream[:300]
        assert b"Job queued" in stream and b"event: end" in stream  # replayed from the start
    upload = raw_answer(server, ["POST /datasets HTTP/1.1", signed, "Content-Length: ²"])
    assert upload[9:10] == b"4", upload[:300]


def test_a_body_sent_with_a_get_is_never_read(server: Server) -> None:
    """The guard counts and caps the bodies of POST, PUT and PATCH only; a JSON body sent
    with a GET, which no route takes, must not be read into memory (or waited for)."""
    token = httpx.post(
        f"{server.url}/auth/token", data={"username": "admin", "password": ADMIN_PASSWORD}
    ).json()["access_token"]
    host, port = server.url.removeprefix("http://").split(":")
    head = [
        "GET /jobs HTTP/1.1",
        f"Host: {host}",
        f"Authorization: Bearer {token}",
        "Content-Type: application/json",
        "Transfer-Encoding: chunked",
    ]
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + b"4\r\n[[[[\r\n")  # no end
        started = time.monotonic()
        status_line = sock.recv(200).split(b"\r\n", 1)[0]
    assert status_line.startswith(b"HTTP/1.1 200"), status_line
    assert time.monotonic() - started < 5
