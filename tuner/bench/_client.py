"""The stream-client seam: one stream's HTTP client, whichever library carries it.

The load generator (:mod:`tuner.bench._load`) and its client processes (:mod:`tuner.bench._workers`) hold
:class:`BaseStreamClient` objects and never learn which library is behind one, as an ``httpx.Client`` never learns
which transport it holds. An implementation supplies only what differs between libraries: how it opens a client,
how it sends a request and hands over the answer's raw bytes (:meth:`BaseStreamClient._post`), a plain GET, how it
closes, and which of its exceptions are which failure (:class:`ClientErrors`). Everything else is here, once: the
accounting of the stream (:class:`~tuner.bench._record.StreamEvents`), the request's deadline, the failure kinds
(:func:`classify`) and the resend of a request that died unread on a connection the server had closed.

The implementations live in private modules and are chosen once, by name, from ``[benchmark] http_client``
(:func:`tuner.bench._clients.stream_client`): ``aiohttp`` (the default; it parses HTTP in C and hands the body over
as it arrives, at less than half httpx's CPU per token: REFERENCE.md, "Load-generator cost") and ``httpx``.

What every client holds to (``tests/bench/test_client_contract.py`` runs the same tests against each):

* One client per stream, one keep-alive connection per client: a pool shared by the streams does work
  proportional to its connections every time a request starts or ends (httpx's did: REFERENCE.md).
* No proxy or other setting from the environment (``trust_env`` off): the figure would measure the proxy.
* ``Accept-Encoding: identity`` (:data:`RAW_BODY`): the body is read raw, as it arrives; nothing decompresses it.
* One TLS context for every client of a process (:func:`ssl_context`): building one loads the CA bundle, ~20 ms of
  CPU, which with one client per stream was 1.4 s of client CPU per 64-stream scenario.
* ``t_sent`` from the library's trace hook; a connect timeout of at most :data:`MAX_CONNECT_S`; the request's
  deadline enforced here, as a whole.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import functools
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import ClassVar, Self

from tuner.bench._record import RequestRecord, StreamError, StreamEvents

__all__ = ["MAX_CONNECT_S", "RAW_BODY", "BaseStreamClient", "ClientErrors", "Reply", "classify", "ssl_context"]

#: Headers every stream client sends with every request: the body is read raw (see the module docstring).
RAW_BODY = {"Accept-Encoding": "identity"}
#: The longest a client waits for a connection (the request's deadline, when shorter, bounds it too).
MAX_CONNECT_S = 10.0
#: Times a request that failed on a connection the server had closed, before any answer, is sent again.
RESENDS = 1


@functools.cache
def ssl_context() -> ssl.SSLContext:
    """The TLS context every client of this process shares (module docstring)."""
    return ssl.create_default_context()


Errors = tuple[type[BaseException], ...]


@dataclass(frozen=True, kw_only=True)
class ClientErrors:
    """One HTTP client library's exceptions, sorted into the failure kinds :func:`classify` names: all a client
    supplies; the kinds, their order and their words are :func:`classify`'s, one rule for every library."""

    connect: Errors
    """Failed to connect (``connection refused`` when the OS refused, else ``connect error``)."""
    timeout: Errors
    closed_mid_stream: Errors
    """The server closed the connection before the body was complete."""
    reset: Errors
    other: Errors
    """The library's base error: the kind is its type's name."""
    stale: Errors
    """Failed on a connection the server had already closed, before any answer (safe to send again)."""


def _refused(exc: BaseException) -> bool:
    """The OS refused the connection: a ``ConnectionRefusedError`` in the chain (aiohttp keeps it as ``os_error``)
    or, when the library kept only its words, "refused" in the message (httpx)."""
    seen: BaseException | None = exc
    while seen is not None:
        os_error = getattr(seen, "os_error", None)
        if isinstance(seen, ConnectionRefusedError) or isinstance(os_error, ConnectionRefusedError):
            return True
        seen = seen.__cause__ or seen.__context__
    return "refused" in str(exc).lower()


def classify(exc: BaseException, errors: ClientErrors) -> tuple[str, str]:
    """A short kind (for "12/32 requests failed (connection reset)") and a detail line."""
    detail = f"{type(exc).__name__}: {exc}".strip()
    if isinstance(exc, StreamError):
        return exc.kind, exc.detail
    if isinstance(exc, errors.connect):
        return ("connection refused" if _refused(exc) else "connect error"), detail
    if isinstance(exc, (*errors.timeout, TimeoutError)):
        return "timeout", detail or "timed out"
    if isinstance(exc, errors.closed_mid_stream):
        return "connection closed mid-stream", detail
    if isinstance(exc, (*errors.reset, ConnectionError)):
        return "connection reset", detail
    if isinstance(exc, errors.other):
        return type(exc).__name__, detail
    return "client error", detail


def _stale(exc: BaseException, errors: ClientErrors) -> bool:
    """Whether the request failed on a connection that was already closed, not on connecting (a server that is
    down): such a request was never read, and may be sent again."""
    return isinstance(exc, errors.stale) and not isinstance(exc, errors.connect)


@dataclass(frozen=True, kw_only=True)
class Reply:
    """An answer whose head has arrived, as a client library hands it over."""

    status: int
    reason: str
    chunks: Callable[[], AsyncIterator[bytes]]
    """The body's raw bytes as they arrive (no decoding, no line splitting: :class:`StreamEvents` does that)."""
    read: Callable[[], Awaitable[bytes]]
    """The whole body (an error's words)."""


class BaseStreamClient(abc.ABC):
    """One stream's HTTP client (module docstring): :meth:`open` it, warm it with :meth:`preconnect`, send its
    requests one at a time with :meth:`stream`, :meth:`aclose` it."""

    errors: ClassVar[ClientErrors]
    """Which of the library's exceptions are which failure kind."""

    @classmethod
    @abc.abstractmethod
    def open(cls, *, timeout_s: float) -> Self:
        """A client for one stream (call it in a running event loop); it connects on its first request."""

    @abc.abstractmethod
    def _post(
        self, url: str, body: bytes, headers: dict[str, str], rec: RequestRecord
    ) -> contextlib.AbstractAsyncContextManager[Reply]:
        """POST ``body``: the context holds the answer once its head has arrived (the library's exceptions pass
        through); ``rec.t_sent`` is set when the body has been written."""

    @abc.abstractmethod
    async def _get(self, url: str, headers: dict[str, str], timeout_s: float) -> None:
        """GET ``url`` and read its whole answer within ``timeout_s``."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Close the client and its connection; safe to call more than once."""

    async def preconnect(self, *, url: str, headers: dict[str, str], timeout_s: float = 5.0) -> None:
        """Open the connection before anything is measured: one ``GET /v1/models`` (``url`` is the stream's).

        A stream's first request otherwise pays the TCP connect and the client's first-request set-up inside the
        measured window: measured on the simulator, a first pass of 8 fresh streams ran 2-3% slower than the
        passes after it, so a one-request warm-up (which opens one connection) left the other seven to the first
        repeat. Best effort: a server that does not answer fails the warm-up or the first repeat, with the evidence.
        """
        base = url.split("/v1/", 1)[0] if "/v1/" in url else url.rstrip("/")
        with contextlib.suppress(Exception):  # best effort, see the docstring
            await self._get(f"{base}/v1/models", headers, timeout_s)

    async def stream(
        self,
        body: bytes,
        *,
        url: str,
        headers: dict[str, str],
        index: int,
        timeout_s: float,
        api: str,
        keep_text: bool = False,
    ) -> RequestRecord:
        """Send one streamed request and time it; never raises for a request failure (``record.error``).

        ``timeout_s`` bounds the whole request; ``keep_text`` keeps the generated text in ``record.text``, for
        servers whose streams carry no usage.
        """
        clock = time.monotonic
        rec = RequestRecord(index=index, t_start=clock())
        events = StreamEvents(chat=api == "chat", keep_text=keep_text)
        try:
            async with asyncio.timeout(timeout_s):
                await self._exchange(url, body, headers, rec, events)
            events.check_complete()
        except asyncio.CancelledError:
            rec.t_end = clock()
            rec.error_kind, rec.error = "cancelled", "cancelled after another request failed"
            raise
        except Exception as exc:
            rec.t_end = clock()
            rec.error_kind, rec.error = classify(exc, self.errors)
            events.fill(rec)  # what the stream delivered before it failed: the evidence counts it
            return rec
        rec.t_end = clock()
        events.fill(rec)
        if rec.output_tokens <= 0:
            # A completed stream with nothing in it is a broken server, not a fast one.
            rec.error_kind, rec.error = "empty response", f"finish_reason {rec.finish_reason!r} with no output tokens"
        return rec

    async def _exchange(
        self, url: str, body: bytes, headers: dict[str, str], rec: RequestRecord, events: StreamEvents
    ) -> None:
        """Send, read every chunk into ``events``; send again if it failed on a dead connection before any answer.

        A server that closes a keep-alive connection right after a response (llama-server does, after a stream)
        races the client's next request on it: the client may write before it has seen the close, and the request
        fails at once, unread. Such a request is safe to send again (:data:`RESENDS` times; the library drops the
        failed connection, so the next try opens a new one). One that got any byte of an answer is never resent:
        the server worked on it, and its failure is the config's.
        """
        for attempt in range(RESENDS + 1):
            answered = False
            try:
                async with self._post(url, body, headers, rec) as reply:
                    answered = True
                    await _read(reply, events)
                return
            except Exception as exc:
                if attempt == RESENDS or answered or not _stale(exc, self.errors):
                    raise


async def _read(reply: Reply, events: StreamEvents) -> None:
    """The answer's body into ``events``, chunk by chunk as it arrives (the hot path: nothing else per chunk)."""
    if reply.status != 200:
        text = (await reply.read())[:500].decode("utf-8", "replace")
        raise StreamError(f"HTTP {reply.status}", text.strip() or reply.reason)
    clock = time.monotonic
    feed = events.feed
    async for chunk in reply.chunks():
        feed(chunk, clock())
    events.close()
