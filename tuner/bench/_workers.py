"""Where the load generator runs: in the benchmark's own event loop, or spread over client processes.

One Python process streaming SSE tops out at about one core: at 64+ streams of one token per event the client,
not the server, sets the pace, and the measurement flattens the differences between configs
(REFERENCE.md, "Load-generator cost"). :class:`ProcessRunner` runs a scenario's streams in ``processes``
worker processes, each with its own event loop and stream clients, and merges their per-request records into
one :class:`~tuner.bench._load.LoadResult`, so the statistics are computed exactly as for one process.

Shared clock
------------
Records carry ``time.monotonic()`` (CLOCK_MONOTONIC on Linux): one clock for every process on the machine, so
the aggregate window (first request sent to last request finished) spans all processes without any offset.

Life cycle
----------
Workers are started (and have imported everything, built their clients) before the warm-up, and live for the
scenario, so their start cost never lands in a measured window. A run is two-phase: every worker first gets its
share of the requests, then one small ``go`` message, so the shares start together.
A worker dies with its parent: ``PR_SET_PDEATHSIG`` (Linux) plus end-of-file on its control socket; the parent
stops them with an ``exit`` message and, failing that, SIGKILL.

Failure
-------
The first failed request stops the scenario, across processes: the worker tells the parent at once
(``failed``), the parent tells the other workers (``stop``), and each applies the usual grace-then-cancel to
its requests in flight. A worker that dies becomes a failed request ("client process died") in the merged
result, so the scenario ends in :class:`~tuner.errors.DiedUnderLoad` like any other failure.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import ctypes
import math
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO, Any

from tuner.bench._client import BaseStreamClient
from tuner.bench._load import LoadResult, LoadTarget, run_load
from tuner.bench._record import RequestRecord, RequestSpec

__all__ = [
    "EVENTS_PER_PROCESS_S",
    "EVENTS_PER_STREAM_S",
    "InProcessRunner",
    "LoadRunner",
    "ProcessRunner",
    "choose_processes",
]

#: SSE events/s one client process handles while staying well under one core (measured with
#: ``scripts/bench_client.py``: ~60 µs of CPU per one-token event through httpx, so ~0.25 core at this rate,
#: leaving room for bursts and a busy machine).
EVENTS_PER_PROCESS_S = 4000.0
#: Events/s a stream is assumed to carry before anything is measured: 200 tokens/s, one token per event (a
#: fast non-speculative decode; speculative servers send fewer, larger events).
EVENTS_PER_STREAM_S = 200.0
_START_TIMEOUT_S = 60.0
# ``-c`` rather than ``-m tuner.bench._workers``: the package imports this module, and runpy would run a second
# copy of it as ``__main__`` (with a warning on stderr).
_WORKER_CODE = "import sys; from tuner.bench._workers import worker_main; worker_main(sys.argv[1:])"
_EXIT_TIMEOUT_S = 5.0
#: How far ahead of now an open-loop run's shared start is set (the ``go`` messages' delivery).
_OPEN_LOOP_LEAD_S = 0.02


def choose_processes(
    setting: int | str,
    *,
    concurrency: int,
    events_per_stream_s: float = EVENTS_PER_STREAM_S,
    events_per_process_s: float = EVENTS_PER_PROCESS_S,
    cores: int | None = None,
) -> int:
    """How many client processes to use for ``concurrency`` streams (``setting`` is ``"auto"`` or a count).

    ``auto``: enough processes for the expected event rate (streams x events/s per stream over what one process
    handles), capped by the cores this process may run on. Never more processes than streams.
    """
    if setting == "auto":
        if cores is None:
            cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        wanted = math.ceil(concurrency * events_per_stream_s / events_per_process_s)
        n = min(wanted, cores)
    elif isinstance(setting, int) and not isinstance(setting, bool) and setting >= 1:
        n = setting
    else:
        raise ValueError(f"client_processes must be 'auto' or an integer >= 1, got {setting!r}")
    return max(1, min(n, concurrency))


class LoadRunner(abc.ABC):
    """Runs a scenario's loads (warm-up, repeats) with the clients it holds for the scenario."""

    @abc.abstractmethod
    async def start(self) -> None:
        """Create clients (and processes) before anything is measured."""

    @abc.abstractmethod
    async def run(
        self, specs: Sequence[RequestSpec], *, concurrency: int, arrivals: Sequence[float] | None = None
    ) -> LoadResult:
        """Run ``specs`` with ``concurrency`` streams in flight; every started request ends in the result.

        ``arrivals`` (seconds from the start, one per spec) makes it an open-loop run
        (:mod:`tuner.bench._load`): each request is sent at its arrival, ``concurrency`` caps what is in flight.
        """

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Close clients, stop processes; safe to call more than once."""

    @property
    @abc.abstractmethod
    def processes(self) -> int:
        """How many processes run the load."""


class InProcessRunner(LoadRunner):
    """The load in the calling event loop: one stream client per stream."""

    def __init__(self, *, target: LoadTarget, streams: int) -> None:
        self._target = target
        self._streams = streams
        self._clients: list[BaseStreamClient] = []

    @property
    def processes(self) -> int:
        return 1

    async def start(self) -> None:
        t = self._target
        self._clients = [t.open_client() for _ in range(self._streams)]
        await asyncio.gather(*(c.preconnect(url=t.url, headers=t.headers) for c in self._clients))

    async def run(
        self, specs: Sequence[RequestSpec], *, concurrency: int, arrivals: Sequence[float] | None = None
    ) -> LoadResult:
        return await self.run_share(specs, concurrency=concurrency, arrivals=arrivals)

    async def run_share(
        self,
        specs: Sequence[RequestSpec],
        *,
        concurrency: int,
        arrivals: Sequence[float] | None = None,
        stop: asyncio.Event | None = None,
        start_at: float | None = None,
    ) -> LoadResult:
        """One process's share of a run (the whole run in-process); ``stop`` may be set from outside.

        Open loop: a client made when all are busy joins this runner's clients (reused by later runs, closed
        by :meth:`aclose`).
        """
        return await run_load(
            target=self._target,
            clients=self._clients,
            specs=specs,
            concurrency=concurrency,
            arrivals=arrivals,
            stop=stop,
            new_client=self._new_client,
            start_at=start_at,
        )

    def _new_client(self) -> BaseStreamClient:
        client = self._target.open_client()
        self._clients.append(client)
        return client

    async def aclose(self) -> None:
        clients, self._clients = self._clients, []
        for c in clients:
            await c.aclose()


def _share(n: int, parts: int, p: int) -> int:
    return n // parts + (1 if p < n % parts else 0)


def _split(requests: int, concurrency: int, parts: int) -> list[list[int]]:
    """Which requests each of ``parts`` processes runs: in proportion to its streams, interleaved.

    A process with ``k`` of the ``concurrency`` streams gets ``k / concurrency`` of the requests (largest
    remainder), so every stream runs as many requests as in one process and no share outlasts the others.
    Requests are dealt in order to the share furthest behind its quota, so early indices start first everywhere.
    """
    streams = [_share(concurrency, parts, p) for p in range(parts)]
    exact = [requests * s / concurrency for s in streams]
    quota = [int(x) for x in exact]
    for p in sorted(range(parts), key=lambda p: quota[p] - exact[p])[: requests - sum(quota)]:
        quota[p] += 1
    out: list[list[int]] = [[] for _ in range(parts)]
    for i in range(requests):
        p = min((q for q in range(parts) if len(out[q]) < quota[q]), key=lambda q: len(out[q]) / quota[q])
        out[p].append(i)
    return out


class _Worker:
    """The parent's handle on one worker process."""

    def __init__(self, *, streams: int) -> None:
        self.streams = streams
        self.stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        parent_sock, child_sock = socket.socketpair()
        package_root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
        with child_sock:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _WORKER_CODE, str(child_sock.fileno()), str(os.getpid())],
                pass_fds=(child_sock.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self.stderr,
                env=env,
            )
        self.conn = Connection(parent_sock.detach())

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, msg: tuple[Any, ...]) -> bool:
        try:
            self.conn.send(msg)
        except OSError:
            return False  # it died; its end-of-file reports that
        return True

    def death_record(self, index: int) -> RequestRecord:
        """A failed request standing for a worker that died mid-run (so the scenario fails, with evidence)."""
        code = self.proc.poll()
        self.stderr.seek(0)
        tail = self.stderr.read()[-400:].decode("utf-8", "replace").strip()
        now = time.monotonic()
        detail = f"load-generator process {self.pid} exited (code {code})" + (f": {tail}" if tail else "")
        return RequestRecord(index=index, t_start=now, t_end=now, error=detail, error_kind="client process died")

    def close(self) -> None:
        self.send(("exit",))
        try:
            self.proc.wait(timeout=_EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.conn.close()
        self.stderr.close()


class ProcessRunner(LoadRunner):
    """The load spread over ``processes`` worker processes (see the module docstring)."""

    def __init__(self, *, target: LoadTarget, streams: int, processes: int) -> None:
        if processes < 1:
            raise ValueError(f"processes must be >= 1, got {processes}")
        self._target = target
        self._streams = streams
        self._n = min(processes, streams)
        self._workers: list[_Worker] = []
        self._run_id = 0

    @property
    def processes(self) -> int:
        return self._n

    @property
    def pids(self) -> list[int]:
        return [w.pid for w in self._workers]

    async def start(self) -> None:
        for p in range(self._n):
            self._workers.append(_Worker(streams=_share(self._streams, self._n, p)))  # closed by aclose
        for w in self._workers:
            w.send(("setup", self._target, w.streams))
        replies = await asyncio.wait_for(self._collect("ready"), _START_TIMEOUT_S)
        dead = [w for w, msg in replies.items() if msg is None]
        if dead:
            raise RuntimeError(f"could not start the benchmark's client processes: {dead[0].death_record(0).error}")

    async def run(
        self, specs: Sequence[RequestSpec], *, concurrency: int, arrivals: Sequence[float] | None = None
    ) -> LoadResult:
        active = self._workers[: max(1, min(self._n, concurrency, len(specs)))]
        n = len(active)
        self._run_id += 1
        # Open loop: one schedule for the whole run, as in one process (each share keeps its requests' arrivals);
        # requests are dealt as the streams are, and each process caps its share of max_concurrency.
        streams = concurrency if arrivals is None else sum(w.streams for w in active)
        for p, (w, picked) in enumerate(zip(active, _split(len(specs), streams, n), strict=True)):
            job = {
                "run": self._run_id,
                "specs": [specs[i] for i in picked],
                "arrivals": None if arrivals is None else [arrivals[i] for i in picked],
                "concurrency": _share(concurrency, n, p),
            }
            w.send(("prepare", job))
        await self._collect("prepared", active)
        # Open loop: one time origin for every share (CLOCK_MONOTONIC is the machine's), a moment ahead so
        # every worker has the message before it; each would otherwise start its schedule on receipt.
        start_at = time.monotonic() + _OPEN_LOOP_LEAD_S if arrivals is not None else None
        for w in active:
            w.send(("go", start_at))
        merged = LoadResult()
        replies = await self._collect("result", active, relay_failures=True)
        for w, msg in replies.items():
            if msg is None:
                merged.merge(LoadResult(records=[w.death_record(-1)], started=1))
            else:
                merged.merge(msg[1])
        return merged

    async def _collect(
        self, kind: str, workers: Sequence[_Worker] | None = None, *, relay_failures: bool = False
    ) -> dict[_Worker, tuple[Any, ...] | None]:
        """Wait for one ``kind`` message from each worker (None for a worker that died); relay ``failed``."""
        chosen = list(self._workers if workers is None else workers)
        run_id = self._run_id

        def stop_others(source: _Worker, replied: dict[_Worker, Any]) -> None:
            if relay_failures:
                for other in chosen:
                    if other is not source and other not in replied:
                        other.send(("stop", run_id))

        return await _Replies(chosen, kind, on_failure=stop_others).wait()

    async def aclose(self) -> None:
        workers, self._workers = self._workers, []
        for w in workers:
            w.send(("exit",))
        for w in workers:
            await asyncio.to_thread(w.close)


class _Replies:
    """Collects one ``kind`` message from each worker (None for a worker that died) without blocking the loop.

    A ``failed`` message (or a death) calls ``on_failure`` at once, while the others still run.
    """

    def __init__(
        self, workers: list[_Worker], kind: str, *, on_failure: Callable[[_Worker, dict[_Worker, Any]], None]
    ) -> None:
        self._workers = workers
        self._kind = kind
        self._on_failure = on_failure
        self._loop = asyncio.get_running_loop()
        self._done: asyncio.Future[None] = self._loop.create_future()
        self.replies: dict[_Worker, tuple[Any, ...] | None] = {}

    def _readable(self, w: _Worker) -> None:
        try:
            msg = w.conn.recv()
        except (EOFError, OSError, pickle.UnpicklingError):
            msg = None
        if msg is not None and msg[0] == "failed":
            self._on_failure(w, self.replies)
            return
        if msg is not None and msg[0] != self._kind:
            msg = ("error", f"unexpected {msg[0]!r} from a load-generator process, expected {self._kind!r}")
        self._loop.remove_reader(w.conn.fileno())
        self.replies[w] = msg
        if msg is None:
            self._on_failure(w, self.replies)
        if len(self.replies) == len(self._workers) and not self._done.done():
            self._done.set_result(None)

    async def wait(self) -> dict[_Worker, tuple[Any, ...] | None]:
        for w in self._workers:
            self._loop.add_reader(w.conn.fileno(), self._readable, w)
        try:
            await self._done
        finally:
            for w in self._workers:
                if w not in self.replies:
                    self._loop.remove_reader(w.conn.fileno())
        for msg in self.replies.values():
            if msg is not None and msg[0] == "error":
                raise RuntimeError(msg[1])
        return self.replies


def make_runner(*, target: LoadTarget, streams: int, processes: int) -> LoadRunner:
    """The in-process runner for one process, the process runner otherwise."""
    if processes <= 1:
        return InProcessRunner(target=target, streams=streams)
    return ProcessRunner(target=target, streams=streams, processes=processes)


# -- the worker process ---------------------------------------------------------------------------------------


def _die_with_parent(parent: int) -> None:
    """Linux: SIGKILL when the parent dies; a parent gone before this point means exit now."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(0)


class _WorkerMain:
    """The worker's side: one event loop, its HTTP clients, and the control socket.

    ``stop`` messages name the run they stop, so one that arrives before its run began (or after it ended)
    neither gets lost nor stops a later run.
    """

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._inbox: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        self._stopped: set[int] = set()
        self._exiting = False
        self._running: tuple[int, asyncio.Event] | None = None
        self._runner: InProcessRunner | None = None
        self._job: dict[str, Any] = {}

    def _readable(self) -> None:
        try:
            msg = self._conn.recv()
        except (EOFError, OSError):
            msg = ("exit",)  # the parent is gone: stop what runs, then leave
            asyncio.get_running_loop().remove_reader(self._conn.fileno())
        if msg[0] == "stop":
            self._stopped.add(msg[1])
        else:
            self._exiting = self._exiting or msg[0] == "exit"
            self._inbox.put_nowait(msg)
        if self._running is not None and (self._exiting or self._running[0] in self._stopped):
            self._running[1].set()

    async def main(self) -> None:
        asyncio.get_running_loop().add_reader(self._conn.fileno(), self._readable)
        try:
            while True:
                msg = await self._inbox.get()
                if msg[0] == "exit":
                    return
                await self._handle(msg)
        finally:
            if self._runner is not None:
                await self._runner.aclose()

    async def _handle(self, msg: tuple[Any, ...]) -> None:
        if msg[0] == "setup":
            target, streams = msg[1], msg[2]
            self._runner = InProcessRunner(target=target, streams=streams)
            await self._runner.start()
            self._conn.send(("ready",))
        elif msg[0] == "prepare":
            self._job = msg[1]
            self._conn.send(("prepared",))
        elif msg[0] == "go":
            self._job["start_at"] = msg[1]
            self._conn.send(("result", await self._run(self._job)))

    async def _run(self, job: dict[str, Any]) -> LoadResult:
        assert self._runner is not None
        run_id = job["run"]
        stop = asyncio.Event()
        if self._exiting or run_id in self._stopped:
            stop.set()
        self._running = (run_id, stop)

        async def tell_parent() -> None:
            await stop.wait()
            if not (self._exiting or run_id in self._stopped):  # our own request failed: the parent stops the others
                self._conn.send(("failed",))

        watcher = asyncio.create_task(tell_parent())
        try:
            return await self._runner.run_share(
                job["specs"],
                concurrency=job["concurrency"],
                arrivals=job["arrivals"],
                stop=stop,
                start_at=job.get("start_at"),
            )
        finally:
            watcher.cancel()
            self._running = None


def worker_main(argv: Sequence[str]) -> None:
    """A worker process's entry point: ``argv`` is the control socket's fd and the parent's pid."""
    fd, parent = int(argv[0]), int(argv[1])
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it stops us
    conn = Connection(fd)
    asyncio.run(_WorkerMain(conn).main())
