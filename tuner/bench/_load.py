"""The load generator: N streams in flight (closed loop), or requests sent at their arrivals (open loop).

Concurrency model
-----------------
``concurrency`` worker coroutines each own one stream client (:class:`~tuner.bench._client.BaseStreamClient`,
whichever library ``[benchmark] http_client`` chose: nothing here asks which) holding one keep-alive connection,
so the per-request cost stays flat with concurrency, and a worker's connection is reused by its next request (no
reconnect inside the window).

Closed loop: each worker takes the next request as soon as its previous one ends, so exactly ``concurrency``
requests are in flight until the queue drains.

Open loop (a scenario's arrival schedule, :mod:`tuner.bench._arrivals`): each request is sent at its arrival,
whatever is in flight, on an idle client (a new one when every client is busy: its connect counts in that
request's latency, as it would for a real user). Latencies count from the arrival (``t_scheduled``), so a
server that falls behind shows a growing queue, never a slower offered rate. ``max_concurrency`` caps what is in
flight (AIPerf's semantics): a request waits for its arrival, then for a slot; the schedule itself never shifts,
so the wait for a slot is part of that request's TTFT and end-to-end latency, while its start delay (the client's
own lateness, which the client-bound check reads) counts from when the slot freed.

Failure: the first failed request stops the dispatch of new ones; requests in flight get :data:`ABORT_GRACE_S` to
finish or fail (a dead server fails them all within milliseconds), then are cancelled. A benchmark with
failures is never summarised into a score (see :class:`~tuner.bench.HttpBenchmark`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tuner.bench._client import BaseStreamClient
from tuner.bench._planted import plant_client_stall
from tuner.bench._record import RequestRecord, RequestSpec, build_body

__all__ = ["LoadResult", "LoadTarget", "MeasuredWindow", "run_load", "thread_cpu_s"]

#: Seconds the requests in flight get to end on their own after the first failure, before they are cancelled.
ABORT_GRACE_S = 2.0


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
    client: type[BaseStreamClient]
    """The stream client, chosen once (:func:`tuner.bench._clients.stream_client`)."""
    keep_text: bool = False
    """Keep each request's generated text (to count its tokens on the server afterwards)."""

    def open_client(self) -> BaseStreamClient:
        """One stream's client (call it in a running event loop)."""
        return self.client.open(timeout_s=self.timeout_s)


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
    target: LoadTarget,
    clients: Sequence[BaseStreamClient],
    specs: Sequence[RequestSpec],
    concurrency: int,
    arrivals: Sequence[float] | None = None,
    stop: asyncio.Event | None = None,
    new_client: Callable[[], BaseStreamClient] | None = None,
    start_at: float | None = None,
) -> LoadResult:
    """Run ``specs`` against ``target`` with ``concurrency`` streams in flight; ``clients`` supplies one client per
    worker. ``stop`` may be set from outside (another client process failed) and is set here by the first failure.

    ``arrivals`` (seconds from the start, one per spec) makes it an open-loop run (module docstring):
    ``concurrency`` is then the cap on requests in flight, and ``new_client`` makes a client when every one in
    ``clients`` is busy (default: one closed at the end of the run). ``start_at`` (``time.monotonic``) is the
    schedule's origin, shared by the client processes of one run (default: now).
    """
    load = _Load(target=target, specs=specs, stop=stop or asyncio.Event())
    cpu0 = thread_cpu_s()
    async with MeasuredWindow() as window:
        if arrivals is not None:
            result = await _open_loop(load, clients, arrivals=arrivals, cap=concurrency, new_client=new_client,
                                      start_at=start_at)  # fmt: skip
        else:
            workers = max(1, min(concurrency, len(specs)))
            if len(clients) < workers:
                raise ValueError(f"need {workers} clients, got {len(clients)}")
            result = await load.run(clients[:workers])
    result.cpu_s.append(thread_cpu_s() - cpu0)
    result.wall_s.append(result.t_end - result.t_begin)
    result.stall_s.append(window.longest_stall_s)
    return result


async def _open_loop(
    load: _Load,
    clients: Sequence[BaseStreamClient],
    *,
    arrivals: Sequence[float],
    cap: int,
    new_client: Callable[[], BaseStreamClient] | None,
    start_at: float | None,
) -> LoadResult:
    """:func:`run_load`'s open loop; the clients it had to add (without ``new_client``) closed after it."""
    extra: list[BaseStreamClient] = []
    grow = new_client or functools.partial(_tracked_client, extra, load.target)
    try:
        return await load.run_open(list(clients), arrivals=arrivals, cap=cap, new_client=grow, start_at=start_at)
    finally:
        for c in extra:
            await c.aclose()


def _tracked_client(opened: list[BaseStreamClient], target: LoadTarget) -> BaseStreamClient:
    client = target.open_client()
    opened.append(client)
    return client


class _Load:
    """One run of a load: its requests' bodies, its workers (closed loop) or arrivals (open loop), and the
    first-failure stop."""

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
        self._queue: asyncio.Queue[int | None] = asyncio.Queue()
        self._stop = stop
        self.result = LoadResult()

    async def _send(self, client: BaseStreamClient, i: int) -> RequestRecord:
        t = self.target
        self.result.started += 1
        return await client.stream(
            self._bodies[i],
            url=t.url,
            headers=t.headers,
            index=self._specs[i].index,
            timeout_s=t.timeout_s,
            api=t.api,
            keep_text=t.keep_text,
        )

    async def _worker(self, client: BaseStreamClient) -> None:
        free_at = self.result.t_begin
        stop = self._stop
        while not stop.is_set():
            i = await self._queue.get()
            if i is None or stop.is_set():
                return
            rec = await self._send(client, i)
            # Due as soon as this worker was free: any later send is the client's own delay.
            rec.t_due = free_at
            free_at = rec.t_end
            self.result.records.append(rec)
            if not rec.ok:
                stop.set()

    async def _open(
        self,
        idle: list[BaseStreamClient],
        arrivals: Sequence[float],
        cap: int,
        new_client: Callable[[], BaseStreamClient],
    ) -> None:
        """Send each request at its arrival (module docstring); returns when every one sent has ended."""
        begin, stop = self.result.t_begin, self._stop
        slots = asyncio.Semaphore(cap)
        freed_at = [begin]
        children: set[asyncio.Task[None]] = set()

        async def one(i: int, client: BaseStreamClient, due: float, ready: float) -> None:
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
            for i, offset in enumerate(arrivals):
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
        clients: list[BaseStreamClient],
        *,
        arrivals: Sequence[float],
        cap: int,
        new_client: Callable[[], BaseStreamClient],
        start_at: float | None = None,
    ) -> LoadResult:
        """The open-loop run: requests sent at ``arrivals``, at most ``cap`` in flight (module docstring)."""
        now = time.monotonic()
        self.result.t_begin = now if start_at is None else start_at
        task = asyncio.create_task(self._open(clients, arrivals, max(1, cap), new_client))
        return await self._supervise([task])

    async def run(self, clients: Sequence[BaseStreamClient]) -> LoadResult:
        """The closed-loop run: one worker per client, each taking the next request when its last one ends."""
        self.result.t_begin = time.monotonic()
        for i in range(len(self._specs)):
            self._queue.put_nowait(i)
        for _ in clients:
            self._queue.put_nowait(None)
        tasks = [asyncio.create_task(self._worker(c)) for c in clients]
        return await self._supervise(tasks)

    async def _supervise(self, tasks: list[asyncio.Task[None]]) -> LoadResult:
        """Wait for ``tasks``; after the first failure give them :data:`ABORT_GRACE_S`, then cancel them."""
        result = self.result
        everything: asyncio.Future[Any] = asyncio.gather(*tasks)
        stopper: asyncio.Future[Any] = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait([everything, stopper], return_when=asyncio.FIRST_COMPLETED)
            if not everything.done():
                # A request failed: give the ones in flight a moment to end on their own, then cut them.
                await asyncio.wait({everything}, timeout=ABORT_GRACE_S)
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            stopper.cancel()
            await asyncio.gather(stopper, everything, return_exceptions=True)
        if everything.done() and not everything.cancelled():
            exc = everything.exception()
            if exc is not None and not isinstance(exc, asyncio.CancelledError):
                raise exc  # a bug in the client must not pass as a benchmark result
        result.t_end = time.monotonic()
        result.cancelled = result.started - len(result.records)
        return result
