"""The load generator: N streams in flight (closed loop), optionally released at a request rate.

Concurrency model
-----------------
``concurrency`` worker coroutines each own one client (an ``aiohttp.ClientSession``, or an ``httpx.AsyncClient``
with ``http_client = "httpx"``) holding one keep-alive connection. A shared ``httpx.AsyncClient`` is what
makes httpx client-bound at 64 streams: its connection pool does work proportional to the number of connections
every time a request starts or ends (REFERENCE.md, "Load-generator cost"). With one client per worker the pool
is always size one, so the per-request cost stays flat with concurrency, and a worker's connection is reused by
its next request (no reconnect inside the window).

Closed loop: each worker takes the next request as soon as its previous one ends, so exactly ``concurrency``
requests are in flight until the queue drains. With ``request_rate`` requests are *released* at that mean rate
(Poisson arrivals from a seeded generator, or evenly spaced) and at most ``concurrency`` run at once; TTFT is
measured from the moment a request is sent, not from its release.

Open loop (a scenario's arrival schedule, :mod:`tuner.bench._arrivals`): each request is sent at its arrival,
whatever is in flight, on an idle client (a new one when every client is busy: its connect counts in that
request's latency, as it would for a real user). Latencies count from the arrival (``t_scheduled``), so a
server that falls behind shows a growing queue, never a slower offered rate. ``max_concurrency`` caps what is in
flight (AIPerf's semantics): a request waits for its arrival, then for a slot; the schedule itself never shifts,
so the wait for a slot is part of that request's TTFT and end-to-end latency, while its start delay (the client's
own lateness, which the client-bound check reads) counts from when the slot freed.

Failure: the first failed request stops the dispatch of new ones; requests in flight get ``abort_grace_s`` to
finish or fail (a dead server fails them all within milliseconds), then are cancelled. A benchmark with
failures is never summarised into a score (see :class:`~tuner.bench.HttpBenchmark`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import random
import resource
import ssl
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from tuner.bench._aiohttp import make_session, stream_request_aiohttp
from tuner.bench._planted import plant_client_stall
from tuner.bench._request import RequestRecord, RequestSpec, build_body, stream_request

__all__ = [
    "LoadResult",
    "LoadTarget",
    "MeasuredWindow",
    "close_stream_client",
    "make_client",
    "make_stream_client",
    "release_schedule",
    "run_load",
    "thread_cpu_s",
]


@dataclass(kw_only=True)
class LoadResult:
    """Every request that ended (successfully or not) plus how many were started.

    ``cpu_s`` and ``wall_s`` hold one entry per client process that ran a share of the load: its CPU time and
    wall time over its share (see :mod:`tuner.bench._workers`); the client-bound check reads them.
    """

    records: list[RequestRecord] = field(default_factory=list)
    started: int = 0
    cancelled: int = 0
    t_begin: float = 0.0
    t_end: float = 0.0
    cpu_s: list[float] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)
    stall_s: list[float] = field(default_factory=list)
    """Per client process, the longest time its event loop could not run during its share (:func:`run_load`)."""

    @property
    def failures(self) -> list[RequestRecord]:
        return [r for r in self.records if not r.ok]

    @property
    def ok(self) -> list[RequestRecord]:
        return [r for r in self.records if r.ok]

    def merge(self, other: LoadResult) -> None:
        """Fold another process's share in: one run, one time axis (records carry ``time.monotonic``)."""
        first = not (self.records or self.started or self.cpu_s)
        self.records.extend(other.records)
        self.started += other.started
        self.cancelled += other.cancelled
        self.t_begin = other.t_begin if first else min(self.t_begin, other.t_begin)
        self.t_end = max(self.t_end, other.t_end)
        self.cpu_s.extend(other.cpu_s)
        self.wall_s.extend(other.wall_s)
        self.stall_s.extend(other.stall_s)


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


def make_stream_client(*, library: str, timeout_s: float) -> Any:
    """One stream's client: an ``httpx.AsyncClient`` or an ``aiohttp.ClientSession`` (call in a running loop)."""
    if library == "aiohttp":
        return make_session(timeout_s=timeout_s, ssl_context=_ssl_context())
    if library == "httpx":
        return make_client(timeout_s=timeout_s)
    raise ValueError(f"library must be 'httpx' or 'aiohttp', got {library!r}")


async def preconnect(client: Any, *, url: str, headers: dict[str, str], timeout_s: float = 5.0) -> None:
    """Open a stream's connection before anything is measured: one ``GET /v1/models`` on its keep-alive client.

    A stream's first request otherwise pays the TCP connect and the client's first-request set-up inside the
    measured window: measured on the simulator, a first pass of 8 fresh streams ran 2-3% slower than the passes
    after it, so a one-request warm-up (which opens one connection) left the other seven to the first repeat.
    Best effort: a server that does not answer fails the warm-up or the first repeat, with the evidence.
    """
    base = url.split("/v1/", 1)[0] if "/v1/" in url else url.rstrip("/")
    try:
        if isinstance(client, httpx.AsyncClient):
            response = await client.get(f"{base}/v1/models", headers=headers, timeout=timeout_s)
            await response.aread()
        else:
            import aiohttp

            async with client.get(
                f"{base}/v1/models", headers=headers, timeout=aiohttp.ClientTimeout(total=timeout_s)
            ) as reply:
                await reply.read()
    except Exception:  # best effort, see the docstring
        pass


async def close_stream_client(client: Any) -> None:
    await (client.aclose() if isinstance(client, httpx.AsyncClient) else client.close())


def thread_cpu_s() -> float:
    """CPU seconds of the calling thread (the event loop's): other threads of the process are not load work."""
    who = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)
    ru = resource.getrusage(who)
    return ru.ru_utime + ru.ru_stime


@dataclass(frozen=True, kw_only=True)
class LoadTarget:
    """Where and how the load is sent: everything about a request except its prompt."""

    url: str
    headers: dict[str, str]
    api: str
    model: str
    timeout_s: float
    library: str = "aiohttp"
    """The HTTP client library: ``aiohttp`` or ``httpx`` (see :mod:`tuner.bench._aiohttp`)."""
    keep_text: bool = False
    """Keep each request's generated text (to count its tokens on the server afterwards)."""


#: How often the stall watch wakes: a wake costs microseconds, so a hundred a second are nothing beside the streams.
STALL_TICK_S = 0.01


class MeasuredWindow:
    """A client process's measured window: no full garbage collection inside it, and a watch on its event loop.

    Every time the client takes (a send, a first token, an end) is late by however long its event loop could not
    run when the event arrived. A full collection walks every object of the process, and `tune start` runs the
    load in the process that holds the study: measured on the test suite's workers, 0.1-0.7 s per collection, so
    every event read meanwhile was stamped that late (a TTFT, a TPOT, the first completion of an achieved rate).
    The heap is frozen for the window (``gc.freeze``: collections inside it walk only the window's own objects)
    and unfrozen after it. What still stalls the loop (a machine whose cores are taken) is measured, not
    prevented: a watch wakes every :data:`STALL_TICK_S` and the longest lateness of a wake is the window's
    ``longest_stall_s`` (a block of the loop less up to a tick), which the client-bound check
    (:mod:`tuner.bench._alarm`) reads.
    """

    def __init__(self, *, tick_s: float = STALL_TICK_S) -> None:
        self._tick_s = tick_s
        self._watch: asyncio.Task[None] | None = None
        self.longest_stall_s = 0.0

    async def __aenter__(self) -> MeasuredWindow:
        gc.freeze()
        self._watch = asyncio.create_task(self._wake())
        plant_client_stall(asyncio.get_running_loop())  # a test hook (tuner.bench._planted); nothing unless set
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        gc.unfreeze()

    async def _wake(self) -> None:
        clock = time.monotonic
        while True:
            due = clock() + self._tick_s
            await asyncio.sleep(self._tick_s)
            self.longest_stall_s = max(self.longest_stall_s, clock() - due)


async def run_load(
    *,
    clients: Sequence[Any],
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
    stop: asyncio.Event | None = None,
    release_s: Sequence[float] | None = None,
    library: str = "aiohttp",
    keep_text: bool = False,
    open_loop: bool = False,
    new_client: Callable[[], Any] | None = None,
    start_at: float | None = None,
) -> LoadResult:
    """Run ``specs`` with ``concurrency`` streams in flight; ``clients`` supplies one client per worker (of the
    HTTP ``library`` they belong to). ``stop`` may be set from outside (another client process failed) and is
    set here by the first failure. ``release_s`` (seconds from the start, one per spec) replaces the schedule
    drawn from ``request_rate``: a client process gets its share of one schedule drawn for the whole run.

    ``open_loop``: ``release_s`` is an arrival schedule (module docstring); ``concurrency`` is then the cap on
    requests in flight, and ``new_client`` makes a client when every one in ``clients`` is busy (default: one
    closed at the end of the run). ``start_at`` (``time.monotonic``) is the schedule's origin, shared by the
    client processes of one run (default: now).
    """
    target = LoadTarget(
        url=url, headers=headers, api=api, model=model, timeout_s=timeout_s, library=library, keep_text=keep_text
    )
    load = _Load(target=target, specs=specs, stop=stop or asyncio.Event())
    cpu0 = thread_cpu_s()
    async with MeasuredWindow() as window:
        if open_loop:
            if release_s is None:
                raise ValueError("an open-loop run needs its arrival schedule (release_s)")
            result = await _open_loop(load, clients, release_s=release_s, cap=concurrency, new_client=new_client,
                                      abort_grace_s=abort_grace_s, start_at=start_at)  # fmt: skip
        else:
            workers = max(1, min(concurrency, len(specs)))
            if len(clients) < workers:
                raise ValueError(f"need {workers} clients, got {len(clients)}")
            if release_s is None:
                release_s = release_schedule(len(specs), request_rate=request_rate, poisson=poisson, seed=seed)
            result = await load.run(clients[:workers], release_s=release_s, abort_grace_s=abort_grace_s)
    result.cpu_s.append(thread_cpu_s() - cpu0)
    result.wall_s.append(result.t_end - result.t_begin)
    result.stall_s.append(window.longest_stall_s)
    return result


async def _open_loop(
    load: _Load,
    clients: Sequence[Any],
    *,
    release_s: Sequence[float],
    cap: int,
    new_client: Callable[[], Any] | None,
    abort_grace_s: float,
    start_at: float | None,
) -> LoadResult:
    """:func:`run_load`'s open loop; the clients it had to add (without ``new_client``) closed after it."""
    t = load.target
    extra: list[Any] = []
    grow = new_client or functools.partial(_tracked_client, extra, library=t.library, timeout_s=t.timeout_s)
    try:
        return await load.run_open(
            list(clients), release_s=release_s, cap=cap, new_client=grow, abort_grace_s=abort_grace_s,
            start_at=start_at,
        )  # fmt: skip
    finally:
        for c in extra:
            await close_stream_client(c)


def _tracked_client(opened: list[Any], *, library: str, timeout_s: float) -> Any:
    client = make_stream_client(library=library, timeout_s=timeout_s)
    opened.append(client)
    return client


def release_schedule(n: int, *, request_rate: float | None, poisson: bool, seed: int) -> list[float] | None:
    """When each of ``n`` requests is released, in seconds from the start (None: all at once, closed loop)."""
    if request_rate is None or request_rate <= 0:
        return None
    rng = random.Random(seed)
    out, t = [], 0.0
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(request_rate) if poisson else 1.0 / request_rate
    return out


class _Load:
    """One run of a load: a release queue, ``len(clients)`` workers, and the first-failure stop."""

    def __init__(self, *, target: LoadTarget, specs: Sequence[RequestSpec], stop: asyncio.Event) -> None:
        self.target = target
        self._specs = specs
        # Bodies are encoded before the window opens: JSON-encoding a 3000-word prompt is client work that must
        # not delay a request start inside the measured window.
        self._bodies = [
            build_body(
                api=target.api, model=target.model, prompt=s.prompt, max_tokens=s.max_tokens, messages=s.messages
            )
            for s in specs
        ]
        self._queue: asyncio.Queue[tuple[int, float] | None] = asyncio.Queue()
        self._stop = stop
        self.result = LoadResult()

    async def _send(self, client: Any, i: int) -> RequestRecord:
        t = self.target
        send = stream_request_aiohttp if t.library == "aiohttp" else stream_request
        self.result.started += 1
        return await send(
            client,
            url=t.url,
            body=self._bodies[i],
            headers=t.headers,
            index=self._specs[i].index,
            timeout_s=t.timeout_s,
            api=t.api,
            keep_text=t.keep_text,
        )

    async def _worker(self, client: Any) -> None:
        free_at = self.result.t_begin
        stop = self._stop
        while not stop.is_set():
            item = await self._queue.get()
            if item is None or stop.is_set():
                return
            i, released = item
            rec = await self._send(client, i)
            # Due when released and this worker was free: any later send is the client's own delay.
            rec.t_due = max(released, free_at)
            free_at = rec.t_end
            self.result.records.append(rec)
            if not rec.ok:
                stop.set()

    async def _dispatch(self, workers: int, release_s: Sequence[float] | None) -> None:
        clock = time.monotonic
        begin = self.result.t_begin
        if release_s is None:
            for i in range(len(self._specs)):
                self._queue.put_nowait((i, begin))
        else:
            for i, offset in enumerate(release_s):
                await asyncio.sleep(max(0.0, begin + offset - clock()))
                if self._stop.is_set():
                    break
                self._queue.put_nowait((i, begin + offset))
        for _ in range(workers):
            self._queue.put_nowait(None)

    async def _open(
        self, idle: list[Any], release_s: Sequence[float], cap: int, new_client: Callable[[], Any]
    ) -> None:
        """Send each request at its arrival (module docstring); returns when every one sent has ended."""
        begin, stop = self.result.t_begin, self._stop
        slots = asyncio.Semaphore(cap)
        freed_at = [begin]
        children: set[asyncio.Task[None]] = set()

        async def one(i: int, client: Any, due: float, ready: float) -> None:
            try:
                rec = await self._send(client, i)
            finally:
                freed_at[0] = time.monotonic()
                slots.release()
            rec.t_scheduled, rec.t_due = due, max(due, ready)
            idle.append(client)
            self.result.records.append(rec)
            if not rec.ok:
                stop.set()

        try:
            for i, offset in enumerate(release_s):
                due = begin + offset
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                waited = slots.locked()
                await slots.acquire()
                if stop.is_set():
                    slots.release()
                    break
                client = idle.pop() if idle else new_client()
                children.add(asyncio.create_task(one(i, client, due, freed_at[0] if waited else due)))
            await asyncio.gather(*children)
        finally:
            for child in children:
                child.cancel()
            await asyncio.gather(*children, return_exceptions=True)

    async def run_open(
        self,
        clients: list[Any],
        *,
        release_s: Sequence[float],
        cap: int,
        new_client: Callable[[], Any],
        abort_grace_s: float,
        start_at: float | None = None,
    ) -> LoadResult:
        """The open-loop run: arrivals on ``release_s``, at most ``cap`` in flight (module docstring)."""
        now = time.monotonic()
        self.result.t_begin = now if start_at is None else start_at
        task = asyncio.create_task(self._open(clients, release_s, max(1, cap), new_client))
        return await self._supervise([task], extra=None, abort_grace_s=abort_grace_s)

    async def run(
        self,
        clients: Sequence[Any],
        *,
        release_s: Sequence[float] | None,
        abort_grace_s: float,
    ) -> LoadResult:
        self.result.t_begin = time.monotonic()
        tasks = [asyncio.create_task(self._worker(c)) for c in clients]
        dispatcher = asyncio.create_task(self._dispatch(len(clients), release_s))
        return await self._supervise(tasks, extra=dispatcher, abort_grace_s=abort_grace_s)

    async def _supervise(
        self, tasks: list[asyncio.Task[None]], *, extra: asyncio.Task[None] | None, abort_grace_s: float
    ) -> LoadResult:
        """Wait for ``tasks``; after the first failure give them ``abort_grace_s``, then cancel them."""
        result = self.result
        everything: asyncio.Future[Any] = asyncio.gather(*tasks)
        stopper: asyncio.Future[Any] = asyncio.ensure_future(self._stop.wait())
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
            helpers: list[asyncio.Future[Any]] = [stopper, everything]
            if extra is not None:
                extra.cancel()
                helpers.append(extra)
            await asyncio.gather(*helpers, return_exceptions=True)
        if everything.done() and not everything.cancelled():
            exc = everything.exception()
            if exc is not None and not isinstance(exc, asyncio.CancelledError):
                raise exc  # a bug in the client must not pass as a benchmark result
        result.t_end = time.monotonic()
        result.cancelled = result.started - len(result.records)
        return result
