"""One contract for every stream client (``tuner.bench.STREAM_CLIENTS``, the ``[benchmark] http_client`` values):
the same tests run against each, on loopback, against real servers: the simulator, and small servers that behave
in one way each (close a keep-alive connection unanswered as llama-server does, cut a stream, answer 500, hang,
speak TLS with a certificate of their own, record what they were sent)."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import datetime
import ipaddress
import json
import socket
import socketserver
import ssl
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.bench.conftest import DDTREE, TIME_SCALE
from tuner.bench import STREAM_CLIENTS, BaseStreamClient, RequestRecord, build_body, build_prompt, stream_client
from tuner.bench._client import ssl_context
from tuner.bench._load import LoadTarget
from tuner.bench._workers import InProcessRunner
from tuner.config import load_config
from tuner.errors import ConfigError
from tuner.sim import ServerConfig, decode_tok_s, step_time_s
from tuner.sim._engine import PREFILL_S_PER_TOKEN
from tuner.sim.testing import SimProcess

ROOT = Path(__file__).resolve().parents[2]
CFG = ServerConfig.from_argv(DDTREE, {"SGLANG_DDTREE_MAX_TOPK": "6"})
PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
TOKENS = 6


@pytest.fixture(params=STREAM_CLIENTS)
def client_type(request: pytest.FixtureRequest) -> type[BaseStreamClient]:
    return stream_client(request.param)


async def _stream(
    client: BaseStreamClient,
    url: str,
    *,
    api: str = "chat",
    prompt: str = "p",
    max_tokens: int = TOKENS,
    timeout_s: float = 10.0,
    keep_text: bool = False,
    index: int = 0,
) -> RequestRecord:
    body = build_body(api=api, model="default", prompt=prompt, max_tokens=max_tokens)
    headers = {"Content-Type": "application/json", "Authorization": "Bearer x"}
    return await client.stream(
        body, url=url, headers=headers, index=index, timeout_s=timeout_s, api=api, keep_text=keep_text
    )


async def _fresh(client_type: type[BaseStreamClient], url: str, **kw: object) -> RequestRecord:
    """One request on a client of its own, closed after it."""
    client = client_type.open(timeout_s=10.0)
    try:
        return await _stream(client, url, **kw)  # type: ignore[arg-type]
    finally:
        await client.aclose()


def _one(client_type: type[BaseStreamClient], url: str, **kw: object) -> RequestRecord:
    return asyncio.run(_fresh(client_type, url, **kw))


# -- servers ---------------------------------------------------------------------------------------------------


def _sse(tokens: int, *, cut: bool = False, usage: bool = True) -> bytes:
    """A chat completion stream's answer, chunked, keep-alive; ``cut``: no end (neither finish_reason nor [DONE])."""
    events = []
    for i in range(tokens):
        chunk = {"choices": [{"index": 0, "delta": {"content": f"t{i} "}, "finish_reason": None}]}
        events.append(f"data: {json.dumps(chunk)}\n\n")
    if not cut:
        done: dict[str, object] = {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}
        if usage:
            done["usage"] = {"prompt_tokens": 3, "completion_tokens": tokens, "total_tokens": tokens + 3}
        events += [f"data: {json.dumps(done)}\n\n", "data: [DONE]\n\n"]
    body = b"".join(f"{len(e.encode()):x}\r\n{e}\r\n".encode() for e in events)
    head = (
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
        "Connection: keep-alive\r\nKeep-Alive: timeout=5, max=100\r\n\r\n"
    )
    return head.encode() + body + (b"" if cut else b"0\r\n\r\n")


class _Recorder:
    """An HTTP/1.1 keep-alive server on loopback (asyncio, in the test's own loop): a GET gets ``{}``, a POST a
    short completion stream (without usage: ``usage=False``; nothing at all: ``answer=False``). It keeps every
    request's head and counts the connections opened and closed."""

    def __init__(self, *, tls: ssl.SSLContext | None = None, answer: bool = True, usage: bool = True) -> None:
        self._tls = tls
        self._answer = answer
        self._usage = usage
        self.opened = 0
        self.closed = 0
        self.heads: list[list[str]] = []
        self.port = 0

    async def __aenter__(self) -> _Recorder:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self._tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        await self._server.wait_closed()

    def url(self, path: str = PATHS["chat"]) -> str:
        return f"{'https' if self._tls else 'http'}://127.0.0.1:{self.port}{path}"

    def header(self, request: int, name: str) -> str | None:
        for line in self.heads[request][1:]:
            key, _, value = line.partition(":")
            if key.strip().lower() == name:
                return value.strip()
        return None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.opened += 1
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                lines = head.decode().split("\r\n")[:-2]
                self.heads.append(lines)
                await reader.readexactly(int(self.header(len(self.heads) - 1, "content-length") or 0))
                if not self._answer:
                    await asyncio.Event().wait()  # never answers (until the client gives up)
                if lines[0].startswith("GET"):
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
                else:
                    writer.write(_sse(TOKENS, usage=self._usage))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            self.closed += 1
            writer.close()


@dataclass
class _Closing:
    """What the closing server did: requests answered, requests dropped unread on a used connection."""

    cut_streams: bool = False
    answered: int = 0
    dropped: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    port: int = 0


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


class _ClosingHandler(socketserver.BaseRequestHandler):
    """Closes a keep-alive connection after each response, as llama-server does after a stream, and makes the
    client's race with that close certain: it waits for the next request on the used connection, then closes it
    unanswered."""

    server: _ThreadedServer

    def handle(self) -> None:
        state = self.server.state
        assert isinstance(state, _Closing)
        stream = socket.SocketIO(self.request, "rb")
        if _read_request(stream) is None:
            return
        with state.lock:
            state.answered += 1
        self.request.sendall(_sse(TOKENS, cut=state.cut_streams))
        if state.cut_streams:
            return  # closed mid-stream
        if _read_request(stream) is not None:  # the client reused the connection: close it unanswered
            with state.lock:
                state.dropped += 1


class _FailingHandler(socketserver.BaseRequestHandler):
    """Fails every request in one way (``server.state``): close unanswered, answer 500, or cut the stream."""

    server: _ThreadedServer

    def handle(self) -> None:
        self.request.recv(65536)  # the request's head (and body): then fail as the server is told to
        how = self.server.state
        if how == "http500":
            self.request.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\nboom")
        elif how == "cut":
            self.request.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                b'3a\r\ndata: {"choices":[{"index":0,"delta":{"content":"a "}}]}\n\n\r\n'
            )


class _ThreadedServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, handler: type[socketserver.BaseRequestHandler], state: object) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.state = state


@contextlib.contextmanager
def _serving(handler: type[socketserver.BaseRequestHandler], state: object) -> Iterator[int]:
    server = _ThreadedServer(handler, state)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def closing_server() -> Iterator[_Closing]:
    state = _Closing()
    with _serving(_ClosingHandler, state) as port:
        state.port = port
        yield state


@pytest.fixture
def failing_server(request: pytest.FixtureRequest) -> Iterator[int]:
    with _serving(_FailingHandler, request.param) as port:
        yield port


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens there once it is closed


# -- the contract ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_a_stream_is_timed_event_by_event_as_it_arrives(
    ddtree_sim: SimProcess, client_type: type[BaseStreamClient], api: str
) -> None:
    prompt = build_prompt(tokens=256, seed=0, scenario="contract", phase="measure", repeat=0, index=0)
    rec = _one(client_type, ddtree_sim.url + PATHS[api], api=api, prompt=prompt, max_tokens=256, timeout_s=30.0)
    assert rec.ok, rec.error
    assert rec.output_tokens == 256 and rec.tokens_from_usage and sum(rec.event_tokens) == 256
    assert rec.prompt_tokens == 256 and rec.finish_reason == "length"
    assert rec.t_sent is not None and rec.t_first is not None and rec.t_last is not None
    assert rec.t_start <= rec.t_sent <= rec.t_first < rec.t_last <= rec.t_end
    # Never faster than the server: the first event waits for the prefill and one decode step.
    first_step = (256 * PREFILL_S_PER_TOKEN + step_time_s(CFG, running=1, context_tokens=256)) / TIME_SCALE
    assert rec.ttft_s is not None and rec.ttft_s > 0.8 * first_step
    # Each event stamped when it arrives: a client that read ahead or in batches would bunch the events and show
    # a pace faster than the server's (the lower bound is loose: a loaded machine may stall the client).
    truth = decode_tok_s(CFG, concurrency=1, context_tokens=256 + 128, workload="prose") * TIME_SCALE
    assert rec.decode_tok_s is not None and 0.7 * truth < rec.decode_tok_s < 1.15 * truth


def test_keep_text_keeps_what_the_stream_said_and_nothing_else(client_type: type[BaseStreamClient]) -> None:
    async def both() -> tuple[RequestRecord, RequestRecord]:
        async with _Recorder(usage=False) as server:
            return await _fresh(client_type, server.url(), keep_text=True), await _fresh(client_type, server.url())

    kept, dropped = asyncio.run(both())
    assert kept.ok and dropped.ok, (kept.error, dropped.error)
    assert kept.text == "".join(f"t{i} " for i in range(TOKENS)) and dropped.text is None
    assert not kept.tokens_from_usage and kept.output_tokens == TOKENS  # no usage: one token per event


@pytest.mark.parametrize(
    ("flags", "request_kw", "kind", "words"),
    [
        (("--context-length", "256"), {"prompt": "word " * 300}, "HTTP 400", "maximum context length"),
        (("--sim-malformed-chunks", "1"), {}, "malformed chunk", ""),
        (("--sim-hang",), {"timeout_s": 0.5}, "timeout", ""),
    ],
)
def test_every_client_names_a_server_s_failure_alike(
    start_sim: Callable[..., SimProcess], flags: tuple[str, ...], request_kw: dict[str, object], kind: str, words: str
) -> None:
    sim = start_sim(*DDTREE, *flags, env={"SGLANG_DDTREE_MAX_TOPK": "6"})
    got = {name: _one(stream_client(name), sim.url + PATHS["chat"], **request_kw) for name in STREAM_CLIENTS}
    assert {name: rec.error_kind for name, rec in got.items()} == dict.fromkeys(STREAM_CLIENTS, kind), got
    assert all(words in (rec.error or "") for rec in got.values()), got


def test_a_port_nobody_listens_on_is_connection_refused(client_type: type[BaseStreamClient]) -> None:
    rec = _one(client_type, f"http://127.0.0.1:{_closed_port()}/v1/chat/completions")
    assert rec.error_kind == "connection refused", rec.error


@pytest.mark.parametrize(
    ("failing_server", "kind", "words"),
    [("close", "connection closed mid-stream", ""), ("http500", "HTTP 500", "boom")],
    indirect=["failing_server"],
)
def test_a_failed_connection_is_named_alike(
    failing_server: int, client_type: type[BaseStreamClient], kind: str, words: str
) -> None:
    rec = _one(client_type, f"http://127.0.0.1:{failing_server}/v1/chat/completions")
    assert rec.error_kind == kind and words in (rec.error or ""), rec.error


@pytest.mark.parametrize("failing_server", ["cut"], indirect=True)
def test_a_cut_stream_counts_what_it_delivered(failing_server: int, client_type: type[BaseStreamClient]) -> None:
    rec = _one(client_type, f"http://127.0.0.1:{failing_server}/v1/chat/completions")
    assert rec.error_kind == "connection closed mid-stream"
    assert rec.output_tokens == 1 and len(rec.event_times) == 1  # the one event it got: the evidence counts it


def test_a_request_on_a_connection_closed_unanswered_is_sent_again(
    client_type: type[BaseStreamClient], closing_server: _Closing
) -> None:
    async def five() -> list[RequestRecord]:
        client = client_type.open(timeout_s=10.0)
        try:
            url = f"http://127.0.0.1:{closing_server.port}/v1/chat/completions"
            return [await _stream(client, url, index=i) for i in range(5)]
        finally:
            await client.aclose()

    records = asyncio.run(five())
    assert [r.error for r in records] == [None] * 5
    assert [r.output_tokens for r in records] == [TOKENS] * 5
    # Every request after the first found its connection closed, unanswered, and was answered on a new one.
    assert closing_server.answered == 5 and closing_server.dropped == 4


def test_a_request_that_got_part_of_an_answer_is_never_sent_again(
    client_type: type[BaseStreamClient], closing_server: _Closing
) -> None:
    closing_server.cut_streams = True  # the stream ends without finish_reason or [DONE]: the config's failure
    rec = _one(client_type, f"http://127.0.0.1:{closing_server.port}/v1/chat/completions")
    assert rec.error_kind == "connection closed mid-stream" and closing_server.answered == 1


def test_one_connection_opened_before_the_load_and_kept(client_type: type[BaseStreamClient]) -> None:
    """The preconnect opens the client's one connection; its requests then reuse it; closing the client closes
    it. Every request asks for the body unencoded (it is read raw) and carries the caller's headers."""

    async def scenario() -> _Recorder:
        async with _Recorder() as server:
            client = client_type.open(timeout_s=10.0)
            await client.preconnect(url=server.url(), headers={"Authorization": "Bearer x"})
            assert server.opened == 1 and server.heads[0][0] == "GET /v1/models HTTP/1.1"
            for i in range(3):
                rec = await _stream(client, server.url(), index=i)
                assert rec.ok, rec.error
            assert (server.opened, server.closed) == (1, 0)
            await client.aclose()
            for _ in range(100):
                if server.closed:
                    break
                await asyncio.sleep(0.01)
            return server

    server = asyncio.run(scenario())
    assert (server.opened, server.closed) == (1, 1)
    posts = ["POST /v1/chat/completions HTTP/1.1"] * 3
    assert [head[0] for head in server.heads] == ["GET /v1/models HTTP/1.1", *posts]
    for i in range(4):
        assert server.header(i, "accept-encoding") == "identity"
        assert server.header(i, "authorization") == "Bearer x"


def test_a_preconnect_to_nothing_is_quiet(client_type: type[BaseStreamClient]) -> None:
    async def scenario() -> None:
        client = client_type.open(timeout_s=10.0)
        try:
            await client.preconnect(url=f"http://127.0.0.1:{_closed_port()}/v1/chat/completions", headers={})
        finally:
            await client.aclose()

    asyncio.run(scenario())  # the warm-up or the first repeat reports a dead server, with its evidence


def test_no_proxy_from_the_environment(client_type: type[BaseStreamClient], monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy in the environment must not carry the benchmark's traffic (the figure would be the proxy's)."""
    nowhere = f"http://127.0.0.1:{_closed_port()}"
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, nowhere)
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)

    async def scenario() -> tuple[RequestRecord, int]:
        async with _Recorder() as server:
            return await _fresh(client_type, server.url()), len(server.heads)

    rec, seen = asyncio.run(scenario())
    assert rec.ok and seen == 1, rec.error


def test_a_cancelled_stream_is_cancelled(client_type: type[BaseStreamClient]) -> None:
    """The load generator cuts the requests in flight after the first failure: a stream must let itself be
    cancelled (never turn the cancellation into a record)."""

    async def scenario() -> None:
        async with _Recorder(answer=False) as server:
            client = client_type.open(timeout_s=10.0)
            try:
                task = asyncio.create_task(_stream(client, server.url(), timeout_s=30.0))
                while not server.heads:
                    await asyncio.sleep(0.01)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            finally:
                await client.aclose()

    asyncio.run(scenario())


def _self_signed(tmp_path: Path) -> tuple[ssl.SSLContext, str]:
    """A TLS server context for 127.0.0.1 with a certificate of its own, and that certificate (PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    # A name of its own: a store holding two certificates of one name finds the issuer by name, maybe the other.
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"tune test {uuid.uuid4()}")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM)
    (tmp_path / "cert.pem").write_bytes(pem)
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    return server, pem.decode()


def test_every_client_of_a_process_shares_one_tls_context(client_type: type[BaseStreamClient], tmp_path: Path) -> None:
    """Clients verify with the process's one context (building one per client loads the CA bundle each time):
    a certificate that context is taught to trust is trusted by the next client, and not before."""
    tls, cert = _self_signed(tmp_path)

    async def scenario() -> tuple[RequestRecord, RequestRecord]:
        async with _Recorder(tls=tls) as server:
            before = await _fresh(client_type, server.url())
            ssl_context().load_verify_locations(cadata=cert)
            return before, await _fresh(client_type, server.url())

    before, after = asyncio.run(scenario())
    assert before.error_kind == "connect error" and "certificate" in (before.error or "").lower(), before.error
    assert after.ok, after.error


def test_each_stream_of_a_runner_connects_once_before_the_load(client_type: type[BaseStreamClient]) -> None:
    async def scenario() -> tuple[int, list[list[str]]]:
        async with _Recorder() as server:
            target = LoadTarget(url=server.url(), headers={}, api="chat", model="m", timeout_s=5.0, client=client_type)
            runner = InProcessRunner(target=target, streams=3)
            await runner.start()
            opened = server.opened
            await runner.aclose()
            return opened, server.heads

    opened, heads = asyncio.run(scenario())
    assert opened == 3 and [h[0] for h in heads] == ["GET /v1/models HTTP/1.1"] * 3


def test_the_record_and_the_seam_import_no_http_library() -> None:
    """What a request is and how it is timed hold for every library: their modules import none."""
    for module in ("_record", "_client", "_sse"):
        tree = ast.parse((ROOT / "tuner" / "bench" / f"{module}.py").read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not {m.split(".")[0] for m in imported} & {"httpx", "httpcore", "h11", "aiohttp"}, module


def test_the_config_accepts_exactly_the_stream_clients(tmp_path: Path) -> None:
    path = tmp_path / "study.toml"
    demo = (ROOT / "studies" / "demo.toml").read_text()
    for name in STREAM_CLIENTS:
        path.write_text(demo.replace("[benchmark]\n", f'[benchmark]\nhttp_client = "{name}"\n', 1))
        assert load_config(path).benchmark.http_client == name
    path.write_text(demo.replace("[benchmark]\n", '[benchmark]\nhttp_client = "curl"\n', 1))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "one of " + ", ".join(repr(n) for n in STREAM_CLIENTS) in str(info.value)
    with pytest.raises(ValueError, match="http_client must be one of aiohttp, httpx, got 'curl'"):
        stream_client("curl")
