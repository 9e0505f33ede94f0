"""The load generator: N streams in flight (closed loop), optionally released at a request rate.

Concurrency model
-----------------
``concurrency`` worker coroutines each own one ``httpx.AsyncClient`` holding one keep-alive connection. A
shared ``httpx.AsyncClient`` is what makes httpx client-bound at 64 streams: its connection pool does work
proportional to the number of connections every time a request starts or ends (REFERENCE.md, "Load-generator
cost"). With one client per worker the pool is always size one, so the per-request cost stays flat with
concurrency, and a worker's connection is reused by its next request (no reconnect inside the window).

Closed loop: each worker takes the next request as soon as its previous one ends, so exactly ``concurrency``
requests are in flight until the queue drains. With ``request_rate`` requests are *released* at that mean rate
(Poisson arrivals from a seeded generator, or evenly spaced) and at most ``concurrency`` run at once; TTFT is
measured from the moment a request is sent, not from its release.

Failure: the first failed request stops the dispatch of new ones; requests in flight get ``abort_grace_s`` to
finish or fail (a dead server fails them all within milliseconds), then are cancelled. A benchmark with
failures is never summarised into a score (see :class:`~tuner.bench.HttpBenchmark`).
"""

from __future__ import annotations

import asyncio
import functools
import random
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from tuner.bench._request import RequestRecord, RequestSpec, build_body, stream_request

__all__ = ["LoadResult", "make_client", "run_load"]


@dataclass(kw_only=True)
class LoadResult:
    """Every request that ended (successfully or not) plus how many were started."""

    records: list[RequestRecord] = field(default_factory=list)
    started: int = 0
    cancelled: int = 0
    t_begin: float = 0.0
    t_end: float = 0.0

    @property
    def failures(self) -> list[RequestRecord]:
        return [r for r in self.records if not r.ok]

    @property
    def ok(self) -> list[RequestRecord]:
        return [r for r in self.records if r.ok]


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    # httpx builds a fresh SSLContext per client by default, loading the CA bundle each time (~20 ms of CPU):
    # with one client per stream that was 1.4 s of client CPU per 64-stream scenario. One shared context.
    return ssl.create_default_context()


def make_client(*, timeout_s: float, connections: int = 1) -> httpx.AsyncClient:
    """An AsyncClient for the benchmark.

    ``trust_env=False``: proxy variables must not silently route benchmark traffic through a proxy (the figure
    would measure the proxy). The read timeout equals the per-request deadline: the deadline is enforced as a
    whole by ``asyncio.timeout`` in :func:`stream_request`.
    """
    return httpx.AsyncClient(
        timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
        trust_env=False,
        verify=_ssl_context(),
    )


async def run_load(
    *,
    clients: Sequence[httpx.AsyncClient],
    url: str,
    headers: dict[str, str],
    api: str,
    model: str,
    specs: Sequence[RequestSpec],
    concurrency: int,
    timeout_s: float,
    request_rate: float | None = None,
    poisson: bool = True,
    seed: int = 0,
    abort_grace_s: float = 2.0,
    keep_text: bool = False,
) -> LoadResult:
    """Run ``specs`` with ``concurrency`` streams in flight; ``clients`` supplies one client per worker."""
    workers = max(1, min(concurrency, len(specs)))
    if len(clients) < workers:
        raise ValueError(f"need {workers} clients, got {len(clients)}")
    # Bodies are encoded before the window opens: JSON-encoding a 3000-word prompt is client work that must
    # not delay a request start inside the measured window.
    bodies = [
        build_body(api=api, model=model, prompt=s.prompt, max_tokens=s.max_tokens, messages=s.messages)
        for s in specs
    ]
    queue: asyncio.Queue[int | None] = asyncio.Queue()
    result = LoadResult()
    stop = asyncio.Event()

    async def worker(client: httpx.AsyncClient) -> None:
        while not stop.is_set():
            i = await queue.get()
            if i is None or stop.is_set():
                return
            result.started += 1
            rec = await stream_request(
                client,
                url=url,
                body=bodies[i],
                headers=headers,
                index=specs[i].index,
                timeout_s=timeout_s,
                api=api,
                keep_text=keep_text,
            )
            result.records.append(rec)
            if not rec.ok:
                stop.set()

    async def dispatch() -> None:
        if request_rate is None or request_rate <= 0:
            for i in range(len(specs)):
                queue.put_nowait(i)
        else:
            rng = random.Random(seed)
            loop = asyncio.get_running_loop()
            t = loop.time()
            for i in range(len(specs)):
                if stop.is_set():
                    break
                queue.put_nowait(i)
                t += rng.expovariate(request_rate) if poisson else 1.0 / request_rate
                await asyncio.sleep(max(0.0, t - loop.time()))
        for _ in range(workers):
            queue.put_nowait(None)

    result.t_begin = time.perf_counter()
    tasks = [asyncio.create_task(worker(clients[w])) for w in range(workers)]
    dispatcher = asyncio.create_task(dispatch())
    everything: asyncio.Future[Any] = asyncio.gather(*tasks)
    stopper: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait([everything, stopper], return_when=asyncio.FIRST_COMPLETED)
        if not everything.done():
            # A request failed: give the ones in flight a moment to end on their own, then cut them.
            await asyncio.wait({everything}, timeout=abort_grace_s)
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        stopper.cancel()
        dispatcher.cancel()
        await asyncio.gather(stopper, dispatcher, everything, return_exceptions=True)
    if everything.done() and not everything.cancelled():
        exc = everything.exception()
        if exc is not None and not isinstance(exc, asyncio.CancelledError):
            raise exc  # a bug in the client must not pass as a benchmark result
    result.t_end = time.perf_counter()
    result.cancelled = result.started - len(result.records)
    return result
