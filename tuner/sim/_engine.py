"""The simulated server's engine loop: the batch scheduler (:mod:`tuner.sim._scheduler`) driven in real time.

One asyncio task runs the loop. Each iteration is one speculative-decoding step: the scheduler admits waiting
requests, retracts some when the KV pool is full (logged as SGLang does), the loop sleeps until the modelled step
ends (with a slowly varying server-wide speed factor as noise; on the model's own clock, so a late wake-up is
caught up, not carried), then every running request advances by its accepted tokens. Acceptance is fractional
in the model, so each request accumulates the fraction and emits whole tokens; every step yields at least the
bonus token.

The engine deals in token *counts* only. Each request gets one wake-up per step carrying ``(start, end)``
indices; the HTTP handler turns them into one SSE event with precomputed JSON fragments, which keeps the
per-event CPU cost low enough for 64+ concurrent streams.

What SGLang exposes about acceptance is kept as SGLang keeps it: per finished request, its generated tokens and
verify steps (the Prometheus counters ``sglang:generation_tokens_total`` / ``sglang:spec_verify_calls_total``);
per ``--decode-log-interval`` decode batches, the interval's acceptance (the ``sglang:spec_accept_length`` /
``sglang:spec_accept_rate`` gauges and the ``Decode batch`` log line) and the cumulative average that
``/server_info`` reports, recomputed only then.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import sys
import time
import traceback
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from tuner.sim._model import ServerConfig, acceptance_length, cuda_graph_max_bs, kv_pool_tokens, verify_width
from tuner.sim._scheduler import CTX_BUCKET, PREFILL_S_PER_TOKEN, BatchScheduler, SchedRequest

__all__ = [
    "ABORT_MESSAGE",
    "PREFILL_S_PER_TOKEN",
    "AcceptanceStats",
    "Engine",
    "EngineRequest",
    "RequestAborted",
    "die_with_cuda_error",
]

#: Correlation time of the slowly varying server-wide speed factor (modelled seconds).
SERVER_NOISE_TAU_S = 5.0
#: What SGLang tells a client whose request alone outgrew the pool.
ABORT_MESSAGE = "Out of memory even after retracting all other requests in the decode batch. Aborting the last request."

LogFn = Callable[[str], None]


class RequestAborted(Exception):
    """The scheduler aborted this request (it alone does not fit in the KV pool)."""


class EngineRequest(SchedRequest):
    """A scheduler request with a mailbox for its HTTP handler."""

    __slots__ = ("_mail", "aborted", "cancelled", "log_metrics", "streaming")

    def __init__(
        self,
        *,
        prompt_tokens: int,
        max_tokens: int,
        pace: float,
        workload: str = "code",
        streaming: bool = False,
        log_metrics: bool = True,
        phase: float = 0.5,
    ) -> None:
        super().__init__(prompt_tokens=prompt_tokens, max_tokens=max_tokens, workload=workload, pace=pace, phase=phase)
        self._mail: asyncio.Queue[tuple[int, int]] = asyncio.Queue()
        self.aborted = False
        self.cancelled = False
        self.streaming = streaming
        self.log_metrics = log_metrics

    @property
    def finished(self) -> bool:
        return self.done or self.aborted or self.cancelled

    async def next_tokens(self) -> tuple[int, int]:
        """Wait for the next step's ``(start, end)`` token indices; ``end == max_tokens`` at the end.

        Raises :class:`RequestAborted` when the scheduler aborted the request.
        """
        start, end = await self._mail.get()
        if start < 0:
            raise RequestAborted(ABORT_MESSAGE)
        return start, end


@dataclass
class AcceptanceStats:
    """SGLang's acceptance bookkeeping (see the module docstring); all counts since boot."""

    generated_tokens: dict[bool, int] = field(default_factory=lambda: {False: 0, True: 0})
    """Tokens of finished requests, by whether they were streamed (the ``is_streaming`` label)."""
    prompt_tokens: dict[bool, int] = field(default_factory=lambda: {False: 0, True: 0})
    verify_calls: int = 0
    retracted_requests: int = 0
    last_retracted: int = 0
    decode_batches: int = 0
    total_accepted: int = 0
    total_forward: int = 0
    interval_accepted: int = 0
    interval_forward: int = 0
    gauge_accept_length: float = 0.0
    gauge_accept_rate: float = 0.0

    @property
    def avg_accept_length(self) -> float | None:
        """``internal_states[0].avg_spec_accept_length``: None until the first logging interval."""
        return self.total_accepted / self.total_forward if self.total_forward else None


class Engine:
    """The asyncio continuous-batching loop plus the acceptance bookkeeping SGLang exposes."""

    def __init__(
        self,
        *,
        cfg: ServerConfig,
        time_scale: float,
        noise: float,
        rng: random.Random,
        log: LogFn,
        decode_log_interval: int = 40,
        speculative: bool = True,
    ) -> None:
        self._cfg = cfg
        self._time_scale = time_scale
        self._noise = noise
        self._rng = rng
        self._log = log
        self._interval = max(1, decode_log_interval)
        self._speculative = speculative
        self._sched = BatchScheduler(cfg)
        self._wake = asyncio.Event()
        self._server_x = 0.0  # log of the server-wide speed factor (an Ornstein-Uhlenbeck process)
        self._graph_bs = cuda_graph_max_bs(cfg)
        self._pool_tokens = max(1, kv_pool_tokens(cfg))
        self._interval_started = time.monotonic()
        self._interval_tokens = 0
        self._stepped: asyncio.Future[None] | None = None
        self._stall_s = 0.0
        self.stats = AcceptanceStats()

        @lru_cache(maxsize=4096)
        def accept(ctx_bucket: int, workload: str) -> float:
            return acceptance_length(cfg, context_tokens=ctx_bucket * CTX_BUCKET, workload=workload)

        self._accept = accept

    @property
    def num_running(self) -> int:
        return len(self._sched.running)

    @property
    def num_waiting(self) -> int:
        return len(self._sched.waiting)

    def submit(
        self,
        *,
        prompt_tokens: int,
        max_tokens: int,
        workload: str = "code",
        streaming: bool = False,
        log_metrics: bool = True,
        text: str = "",
    ) -> EngineRequest:
        """Queue a request; it joins the running batch at the next step boundary.

        ``log_metrics=False`` (SGLang's health checks) keeps it out of the Prometheus counters. ``text`` (the
        prompt) sets where the request's fractional acceptance starts: a greedy decode of the same request
        accepts the same tokens at the same steps every time, different requests land a step apart.
        """
        sigma = self._noise / math.sqrt(2.0)
        pace = max(0.5, self._rng.gauss(1.0, sigma)) if sigma > 0 else 1.0
        phase = zlib.crc32(text.encode()) / 2**32
        req = EngineRequest(
            prompt_tokens=prompt_tokens,
            max_tokens=max(0, max_tokens),
            pace=pace,
            workload=workload,
            streaming=streaming,
            log_metrics=log_metrics,
            phase=phase,
        )
        if req.max_tokens == 0:
            req._mail.put_nowait((0, 0))
            return req
        self._sched.submit(req)
        self._wake.set()
        return req

    def stall(self, modelled_seconds: float) -> None:
        """Stop stepping for ``modelled_seconds`` before the next step (a server that hangs mid-run: a GC pause,
        a stuck collective). Requests keep arriving and queue; none is lost."""
        self._stall_s += max(0.0, modelled_seconds)
        self._wake.set()

    async def next_output(self) -> None:
        """Wait until the next step has produced tokens (for any request)."""
        if self._stepped is None or self._stepped.done():
            self._stepped = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._stepped)

    def cancel(self, req: EngineRequest) -> None:
        """Drop a request whose client went away (frees its slot like an abort)."""
        req.cancelled = True
        self._sched.cancel(req)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        sched = self._sched
        deadline = loop.time()
        while True:
            if sched.idle:
                self._wake.clear()
                await self._wake.wait()
                deadline = loop.time()
            prefill = sched.admit()
            self._make_room()
            if not sched.running:
                continue
            self._maybe_crash()
            dt = self._noisy(sched.step_seconds(prefill)) / self._time_scale
            if self._stall_s:
                dt, self._stall_s = dt + self._stall_s / self._time_scale, 0.0
            # The modelled GPU keeps its own clock: a step this machine woke late for shortens the next sleep, and
            # steps run back to back until the loop is on time again. Restarting the clock at every late wake-up
            # added each lateness to every running request, so a loaded test machine ran slower than the model.
            deadline += dt
            await asyncio.sleep(max(0.0, deadline - loop.time()))
            self._step()

    def _noisy(self, model_dt: float) -> float:
        sigma = self._noise / math.sqrt(2.0)
        if sigma > 0:
            # Slowly varying server-wide factor: consecutive benchmark runs differ by ~noise.
            decay = math.exp(-model_dt / SERVER_NOISE_TAU_S)
            self._server_x = self._server_x * decay + sigma * math.sqrt(1.0 - decay * decay) * self._rng.gauss(0, 1)
        return model_dt * math.exp(-self._server_x)

    def _make_room(self) -> None:
        retraction = self._sched.make_room()
        self.stats.last_retracted = 0 if retraction is None else retraction.requests
        if retraction is None:
            return
        self.stats.retracted_requests += retraction.requests
        for line in retraction.log_lines():
            self._log(line)
        aborted = retraction.aborted
        if isinstance(aborted, EngineRequest):
            aborted.aborted = True
            aborted._mail.put_nowait((-1, -1))

    def _maybe_crash(self) -> None:
        limit = self._cfg.crash_above_tokens
        tokens = self._sched.batch_tokens()
        if limit is not None and tokens > limit:
            die_with_cuda_error(f"({len(self._sched.running)} running requests, {tokens} tokens in the decode batch)")

    def _step(self) -> None:
        batch = len(self._sched.running)
        accepted = 0

        def emit(req: SchedRequest, start: int) -> None:
            nonlocal accepted
            accepted += req.generated - start
            if isinstance(req, EngineRequest):
                req._mail.put_nowait((start, req.generated))

        for req in self._sched.advance(lambda r: self._accept(r.context // CTX_BUCKET, r.workload) * r.pace, emit):
            if isinstance(req, EngineRequest) and req.log_metrics:
                self.stats.generated_tokens[req.streaming] += req.generated
                self.stats.prompt_tokens[req.streaming] += req.prompt_tokens
                self.stats.verify_calls += req.verify_steps if self._speculative else 0
        self._record_batch(accepted, batch)
        if self._stepped is not None and not self._stepped.done():
            self._stepped.set_result(None)

    def _record_batch(self, accepted: int, batch_size: int) -> None:
        """SGLang's per-decode-batch bookkeeping; every ``decode_log_interval`` batches, the log line and gauges."""
        s = self.stats
        s.decode_batches += 1
        s.interval_accepted += accepted
        s.interval_forward += batch_size
        self._interval_tokens += accepted
        if s.decode_batches % self._interval or not self._speculative or s.interval_forward == 0:
            return
        accept = s.interval_accepted / s.interval_forward
        drafts = max(1, verify_width(self._cfg) - 1)
        s.gauge_accept_length = accept
        s.gauge_accept_rate = min(1.0, (s.interval_accepted - s.interval_forward) / (s.interval_forward * drafts))
        s.total_accepted += s.interval_accepted
        s.total_forward += s.interval_forward
        s.interval_accepted = s.interval_forward = 0
        now = time.monotonic()
        throughput = self._interval_tokens / max(1e-9, (now - self._interval_started) * self._time_scale)
        self._interval_started, self._interval_tokens = now, 0
        tokens = self._sched.batch_tokens()
        self._log(
            f"Decode batch, #running-req: {self.num_running}, #token: {tokens}, "
            f"token usage: {tokens / self._pool_tokens:.2f}, accept len: {accept:.2f}, "
            f"accept rate: {s.gauge_accept_rate:.2f}, cuda graph: {self.num_running <= self._graph_bs}, "
            f"gen throughput (token/s): {throughput:.2f}, #queue-req: {self.num_waiting}"
        )


def die_with_cuda_error(detail: str = "") -> None:
    """Print a CUDA error traceback like a scheduler dying mid-batch, then kill the whole process at once.

    ``os._exit`` (not an exception) is deliberate: a real scheduler crash takes the server down without
    finishing open HTTP streams, and clients must see their streams cut.
    """
    try:
        raise RuntimeError(
            "CUDA error: an illegal memory access was encountered\n"
            "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
            "might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1"
            + (f"\n{detail}" if detail else "")
        )
    except RuntimeError:
        sys.stderr.write("[TP0] Scheduler hit an exception: " + traceback.format_exc())
    sys.stderr.write("Received sigquit from a child process. It usually means the child failed.\n")
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(1)
