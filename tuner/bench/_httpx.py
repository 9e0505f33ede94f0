"""The httpx stream client (``[benchmark] http_client = "httpx"``), and the benchmark's control connection.

httpx spends most of a one-token event's client CPU in its per-chunk HTTP/1.1 layers (httpcore, h11, the response
stream wrappers): about twice aiohttp's (REFERENCE.md, "Load-generator cost"; ``scripts/bench_client.py
--side-by-side``), so it is the fallback. :func:`async_client` also makes the benchmark's control connection
(flush, counters, token counts: never a stream), whichever library the streams use.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx

from tuner.bench._client import MAX_CONNECT_S, RAW_BODY, BaseStreamClient, ClientErrors, Reply, ssl_context
from tuner.bench._record import RequestRecord

__all__ = ["HttpxStreamClient", "async_client"]


def async_client(
    *, timeout_s: float, connections: int = 1, headers: Mapping[str, str] | None = None
) -> httpx.AsyncClient:
    """An AsyncClient for the benchmark: no proxy from the environment, the process's one TLS context.

    The read timeout equals the request's deadline, which the stream client enforces as a whole.
    """
    return httpx.AsyncClient(
        timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, MAX_CONNECT_S)),
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
        headers=headers,
        trust_env=False,
        verify=ssl_context(),
    )


class HttpxStreamClient(BaseStreamClient):
    """A stream's ``httpx.AsyncClient``, its pool one connection deep."""

    errors = ClientErrors(
        connect=(httpx.ConnectError,),
        timeout=(httpx.TimeoutException,),
        # httpx's wording for a body cut short: "peer closed connection without sending complete message".
        closed_mid_stream=(httpx.RemoteProtocolError,),
        reset=(httpx.ReadError, httpx.WriteError),
        other=(httpx.HTTPError,),
        stale=(httpx.RemoteProtocolError, httpx.WriteError, httpx.ReadError),
    )

    def __init__(self, *, client: httpx.AsyncClient) -> None:
        self._client = client

    @classmethod
    def open(cls, *, timeout_s: float) -> HttpxStreamClient:
        return cls(client=async_client(timeout_s=timeout_s, headers=RAW_BODY))

    @contextlib.asynccontextmanager
    async def _post(self, url: str, body: bytes, headers: dict[str, str], rec: RequestRecord) -> AsyncIterator[Reply]:
        async def trace(name: str, info: dict[str, Any]) -> None:
            if name == "http11.send_request_body.complete":
                rec.t_sent = time.monotonic()

        async with self._client.stream("POST", url, content=body, headers=headers, extensions={"trace": trace}) as r:
            yield Reply(status=r.status_code, reason=r.reason_phrase, chunks=r.aiter_raw, read=r.aread)

    async def _get(self, url: str, headers: dict[str, str], timeout_s: float) -> None:
        await self._client.get(url, headers=headers, timeout=timeout_s)  # reads the whole answer

    async def aclose(self) -> None:
        await self._client.aclose()
