"""The aiohttp client path: the same request, accounting and failure model as :func:`stream_request`.

httpx spends most of a one-token event's client CPU in its per-chunk HTTP/1.1 layers (httpcore, h11, the
response stream wrappers); aiohttp parses HTTP in C and hands the body over as it arrives, at less than half the
CPU per token (REFERENCE.md, "Load-generator cost"; ``scripts/bench_client.py --side-by-side``). Only sending
and which of the library's exceptions are which (:class:`~tuner.bench._request.ClientErrors`) differ from the
httpx path: events go through the same
:class:`~tuner.bench._request.StreamEvents`, the deadline and failure handling through the same
:func:`~tuner.bench._request.timed_stream`.

aiohttp is imported lazily: the httpx path must not pay for it.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from tuner.bench._request import (
    ClientErrors,
    RequestRecord,
    StreamError,
    StreamEvents,
    resend_unanswered,
    timed_stream,
)

if TYPE_CHECKING:
    import aiohttp

__all__ = ["make_session", "stream_request_aiohttp"]


async def _on_sent(session: Any, ctx: SimpleNamespace, params: Any) -> None:
    rec = ctx.trace_request_ctx
    if rec is not None:
        rec.t_sent = time.monotonic()  # headers, then (last) the body: the last call is when it was all sent


def make_session(*, timeout_s: float, ssl_context: Any) -> aiohttp.ClientSession:
    """One session holding one keep-alive connection (one per stream, as with httpx); no proxy from the env."""
    import aiohttp

    trace = aiohttp.TraceConfig()
    trace.on_request_headers_sent.append(_on_sent)
    trace.on_request_chunk_sent.append(_on_sent)
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=1, ssl=ssl_context),
        timeout=aiohttp.ClientTimeout(total=None, connect=min(timeout_s, 10.0)),
        trust_env=False,
        trace_configs=[trace],
        auto_decompress=False,
    )


def _aiohttp_errors() -> ClientErrors:
    import aiohttp

    return ClientErrors(
        connect=(aiohttp.ClientConnectorError,),
        timeout=(aiohttp.ServerTimeoutError,),
        closed_mid_stream=(aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError),
        reset=(aiohttp.ClientOSError,),
        other=(aiohttp.ClientError,),
        # "Can not write request body", "Server disconnected": the connection was closed already.
        stale=(aiohttp.ServerDisconnectedError, aiohttp.ClientOSError),
    )


async def stream_request_aiohttp(
    session: aiohttp.ClientSession,
    *,
    url: str,
    body: bytes,
    headers: dict[str, str],
    index: int,
    timeout_s: float,
    api: str,
    keep_text: bool = False,
) -> RequestRecord:
    """Send one streamed request with aiohttp and time it; never raises for a request failure."""
    clock = time.monotonic
    rec = RequestRecord(index=index, t_start=clock())
    events = StreamEvents(chat=api == "chat", keep_text=keep_text)

    answered = False

    async def send() -> None:
        nonlocal answered
        async with session.post(url, data=body, headers=headers, trace_request_ctx=rec) as resp:
            answered = True
            if resp.status != 200:
                text = (await resp.read())[:500].decode("utf-8", "replace")
                raise StreamError(f"HTTP {resp.status}", text.strip() or (resp.reason or ""))
            feed = events.feed
            async for chunk in resp.content.iter_any():
                feed(chunk, clock())
            events.close()

    errors = _aiohttp_errors()

    async def exchange() -> None:
        await resend_unanswered(send, answered=lambda: answered, errors=errors)

    return await timed_stream(rec, events, exchange, timeout_s=timeout_s, errors=errors)
