"""The aiohttp stream client (``[benchmark] http_client = "aiohttp"``, the default).

httpx spends most of a one-token event's client CPU in its per-chunk HTTP/1.1 layers; aiohttp parses HTTP in C
and hands the body over as it arrives, at less than half the CPU per token (REFERENCE.md, "Load-generator cost";
``scripts/bench_client.py --side-by-side``).

This module is imported only when aiohttp is chosen (:func:`tuner.bench._clients.stream_client`): ``import
tuner.study`` must not pay for aiohttp.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import aiohttp

from tuner.bench._client import MAX_CONNECT_S, RAW_BODY, BaseStreamClient, ClientErrors, Reply, ssl_context
from tuner.bench._record import RequestRecord

__all__ = ["AiohttpStreamClient"]


async def _on_sent(session: Any, ctx: SimpleNamespace, params: Any) -> None:
    rec = ctx.trace_request_ctx
    if rec is not None:
        rec.t_sent = time.monotonic()  # headers, then (last) the body: the last call is when it was all sent


class AiohttpStreamClient(BaseStreamClient):
    """A stream's ``aiohttp.ClientSession``, its connector one connection deep."""

    errors = ClientErrors(
        connect=(aiohttp.ClientConnectorError,),
        timeout=(aiohttp.ServerTimeoutError,),
        closed_mid_stream=(aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError),
        reset=(aiohttp.ClientOSError,),
        other=(aiohttp.ClientError,),
        # "Can not write request body", "Server disconnected": the connection was closed already.
        stale=(aiohttp.ServerDisconnectedError, aiohttp.ClientOSError),
    )

    def __init__(self, *, session: aiohttp.ClientSession) -> None:
        self._session = session

    @classmethod
    def open(cls, *, timeout_s: float) -> AiohttpStreamClient:
        trace = aiohttp.TraceConfig()
        trace.on_request_headers_sent.append(_on_sent)
        trace.on_request_chunk_sent.append(_on_sent)
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=1, ssl=ssl_context()),
            timeout=aiohttp.ClientTimeout(total=None, connect=min(timeout_s, MAX_CONNECT_S)),
            headers=RAW_BODY,
            trust_env=False,
            trace_configs=[trace],
            auto_decompress=False,
        )
        return cls(session=session)

    @contextlib.asynccontextmanager
    async def _post(self, url: str, body: bytes, headers: dict[str, str], rec: RequestRecord) -> AsyncIterator[Reply]:
        async with self._session.post(url, data=body, headers=headers, trace_request_ctx=rec) as r:
            yield Reply(status=r.status, reason=r.reason or "", chunks=r.content.iter_any, read=r.read)

    async def _get(self, url: str, headers: dict[str, str], timeout_s: float) -> None:
        async with self._session.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout_s)) as r:
            await r.read()

    async def aclose(self) -> None:
        await self._session.close()
