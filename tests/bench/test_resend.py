"""A server that closes a keep-alive connection after each response, as llama-server does after a stream.

The client may reuse such a connection before it has seen the close: the request then fails at once, unread.
The server here makes that race certain (it waits for the next request on a used connection, then closes it
unanswered), so every reused connection fails. Both client libraries must resend such a request on a new
connection and lose nothing; a request that got any part of an answer must never be sent twice.
"""

from __future__ import annotations

import asyncio
import json
import socket
import socketserver
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from tuner.bench._load import close_stream_client, make_stream_client, run_load
from tuner.bench._request import RequestSpec

TOKENS = 6


def _read_request(stream: socket.SocketIO) -> bytes | None:
    """One HTTP request's body (None when the peer closed the connection first)."""
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = stream.read(1)
        if not chunk:
            return None
        head += chunk
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    body = b""
    while len(body) < length:
        chunk = stream.read(length - len(body))
        if not chunk:
            return None
        body += chunk
    return body


def _stream_response(tokens: int, *, cut: bool) -> bytes:
    events = []
    for i in range(tokens):
        chunk = {"choices": [{"index": 0, "delta": {"content": f"t{i} "}, "finish_reason": None}]}
        events.append(f"data: {json.dumps(chunk)}\n\n")
    if not cut:
        done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": tokens, "total_tokens": tokens + 3}}  # fmt: skip
        events += [f"data: {json.dumps(done)}\n\n", "data: [DONE]\n\n"]
    body = b"".join(f"{len(e.encode()):x}\r\n{e}\r\n".encode() for e in events)
    head = (
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
        "Connection: keep-alive\r\nKeep-Alive: timeout=5, max=100\r\n\r\n"
    )
    return head.encode() + body + (b"" if cut else b"0\r\n\r\n")


@dataclass
class ClosingServer:
    """Counts what it did: requests answered, requests dropped unread on a used connection, streams cut."""

    cut_streams: bool = False
    answered: int = 0
    dropped: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    port: int = 0


class _Handler(socketserver.BaseRequestHandler):
    server: _TCPServer

    def handle(self) -> None:
        state = self.server.state
        stream = socket.SocketIO(self.request, "rb")
        if _read_request(stream) is None:
            return
        with state.lock:
            state.answered += 1
        self.request.sendall(_stream_response(TOKENS, cut=state.cut_streams))
        if state.cut_streams:
            return  # closed mid-stream
        if _read_request(stream) is not None:  # the client reused the connection: close it unanswered
            with state.lock:
                state.dropped += 1


class _TCPServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, state: ClosingServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state


@pytest.fixture
def closing_server() -> Iterator[ClosingServer]:
    state = ClosingServer()
    server = _TCPServer(state)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


async def _run(library: str, port: int, requests: int) -> list:
    specs = [RequestSpec(index=i, prompt=f"p{i}", max_tokens=TOKENS) for i in range(requests)]
    client = make_stream_client(library=library, timeout_s=10)
    try:
        result = await run_load(
            clients=[client],
            url=f"http://127.0.0.1:{port}/v1/chat/completions",
            headers={"Content-Type": "application/json"},
            api="chat",
            model="m",
            specs=specs,
            concurrency=1,
            timeout_s=10,
            library=library,
        )
    finally:
        await close_stream_client(client)
    return result.records


@pytest.mark.parametrize("library", ["aiohttp", "httpx"])
def test_a_request_on_a_connection_closed_unanswered_is_sent_again(library: str, closing_server: ClosingServer) -> None:
    records = asyncio.run(_run(library, closing_server.port, requests=5))
    assert [r.error for r in records] == [None] * 5
    assert [r.output_tokens for r in records] == [TOKENS] * 5
    # Every request after the first found its connection closed, unanswered, and was answered on a new one.
    assert closing_server.answered == 5 and closing_server.dropped == 4


@pytest.mark.parametrize("library", ["aiohttp", "httpx"])
def test_a_request_that_got_part_of_an_answer_is_never_sent_again(
    library: str, closing_server: ClosingServer
) -> None:
    closing_server.cut_streams = True  # the stream ends without finish_reason or [DONE]: the config's failure
    [record] = asyncio.run(_run(library, closing_server.port, requests=1))
    assert record.error_kind == "connection closed mid-stream" and closing_server.answered == 1
