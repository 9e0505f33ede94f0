"""Both HTTP client libraries name a failed request the same way: one classification (``classify`` over each
library's :class:`ClientErrors`), checked here against real sockets that fail in each way. (A reset before any
answer is left out: whether a library sees the RST or only the close depends on timing, not on the library.)"""

from __future__ import annotations

import asyncio
import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest

from tuner.bench._load import close_stream_client, make_stream_client, run_load
from tuner.bench._request import RequestSpec

LIBRARIES = ["aiohttp", "httpx"]


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        self.request.recv(65536)  # the request's head (and body): then fail as the server is told to
        how = self.server.how
        if how == "close":
            return  # closed without a byte of an answer
        if how == "http500":
            self.request.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\nboom")
        if how == "cut":
            self.request.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                b'3a\r\ndata: {"choices":[{"index":0,"delta":{"content":"a "}}]}\n\n\r\n'
            )


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, how: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.how = how


@pytest.fixture
def failing_server(request: pytest.FixtureRequest) -> Iterator[int]:
    server = _Server(request.param)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _kind(library: str, port: int) -> tuple[str | None, str | None]:
    async def run() -> tuple[str | None, str | None]:
        client = make_stream_client(library=library, timeout_s=30)
        try:
            result = await run_load(
                clients=[client],
                url=f"http://127.0.0.1:{port}/v1/chat/completions",
                headers={"Content-Type": "application/json"},
                api="chat",
                model="m",
                specs=[RequestSpec(index=0, prompt="p", max_tokens=4)],
                concurrency=1,
                timeout_s=30,
                library=library,
            )
        finally:
            await close_stream_client(client)
        [record] = result.records
        return record.error_kind, record.error

    return asyncio.run(run())


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens there once it is closed


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_port_nobody_listens_on_is_connection_refused(library: str) -> None:
    kind, error = _kind(library, _closed_port())
    assert kind == "connection refused", error


@pytest.mark.parametrize(
    ("failing_server", "kind"),
    [
        ("close", "connection closed mid-stream"),
        ("http500", "HTTP 500"),
        ("cut", "connection closed mid-stream"),
    ],
    indirect=["failing_server"],
)
def test_both_libraries_name_a_failure_alike(failing_server: int, kind: str) -> None:
    got = {library: _kind(library, failing_server) for library in LIBRARIES}
    assert {library: k for library, (k, _) in got.items()} == dict.fromkeys(LIBRARIES, kind), got
