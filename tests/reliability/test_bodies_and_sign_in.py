"""Hostile uploads and password guessing against a real server, over raw sockets."""

import select
import socket
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

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


def test_guessing_the_admin_password_is_throttled_and_the_owner_is_not_locked_out(
    server: Server,
) -> None:
    statuses: dict[int, int] = {}
    started = time.monotonic()
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for guess in range(200):
            response = client.post(
                "/auth/token", data={"username": "admin", "password": f"guess-{guess}"}
            )
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        took = time.monotonic() - started
        print(f"\n200 wrong admin passwords in {took:.1f} s: {statuses}")
        assert statuses.get(401, 0) <= 6 and statuses.get(429, 0) >= 194
        # The owner, from elsewhere: the guesses that were answered at all are few.
        owner = client.post(
            "/auth/token",
            data={"username": "admin", "password": ADMIN_PASSWORD},
            headers={"X-Forwarded-For": "192.0.2.10"},  # uvicorn trusts it from loopback
        )
        assert owner.status_code == 200, owner.text
