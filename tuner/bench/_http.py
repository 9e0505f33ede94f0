"""The HTTP benchmark: OpenAI-compatible streaming load against the live server, one scenario at a time.

A scenario runs as: clients (one per stream, of the library ``[benchmark] http_client`` names: the seam is
:mod:`tuner.bench._client`; and client processes, ``[benchmark] client_processes``) started -> warm-up
(``warmup_requests``, or with ``warmup = "auto"`` a measured probe pass or nothing, see
:mod:`tuner.bench._warmup`; awaited to completion so it cannot overlap the window) -> counters snapshot ->
``min_repeats``..``max_repeats`` x (``/flush_cache``, measured run; after each, the sequential policy says whether
another repeat is worth it) -> counters snapshot -> summary, with the client-bound check
(:mod:`tuner.bench._alarm`). The sync :meth:`HttpBenchmark.run_scenario` runs the whole scenario in one
``asyncio.run``, so its connections (and processes) live for the scenario (the warm-up opens them; measured
requests reuse them) and nothing leaks between scenarios. :meth:`HttpBenchmark.extend_scenario` adds one counted
repeat to a scenario measured earlier (its own prompts, fresh clients, no warm-up: the server has served the
shape since its start) and summarises it with the earlier repeats; acceptance is then the token-weighted mean of
the windows' counters.

Any failed request (HTTP error, cut or malformed stream, timeout, a server that dies) raises
:class:`~tuner.errors.DiedUnderLoad`: a config that cannot survive its own benchmark is a failed config, never
a low score.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import statistics
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import httpx

from tuner.bench._alarm import CPU_BUDGET_CORES, MIN_START_DELAY_S, ClientLoad, client_load
from tuner.bench._arrivals import arrival_schedule
from tuner.bench._base import BaseBenchmark, ScenarioResult
from tuner.bench._clients import stream_client
from tuner.bench._httpx import async_client
from tuner.bench._latency import latency_figures, request_rows
from tuner.bench._load import LoadResult, LoadTarget
from tuner.bench._planted import arm_client_stall
from tuner.bench._prompts import build_prompt, prompt_seed
from tuner.bench._record import RequestRecord, RequestSpec, recount
from tuner.bench._server import ServerProbe, acceptance_between
from tuner.bench._warmup import WarmupPolicy
from tuner.bench._workers import LoadRunner, choose_processes, make_runner
from tuner.config import BenchmarkSection, Scenario, chat_text, load_trace, sample_chat, tag_chat
from tuner.dialects import BaseServerDialect, ServerSnapshot, default_dialect
from tuner.endpoint import Endpoint
from tuner.errors import DiedUnderLoad
from tuner.stats import RepeatDecision, SequentialPolicy, percentile

__all__ = ["HttpBenchmark", "RepeatCallback", "RequestsCallback"]

RepeatCallback = Callable[[Scenario, int, Sequence[float]], None]
#: Called with each measured pass's requests (:func:`tuner.bench._latency.request_rows`), counted or run again.
RequestsCallback = Callable[[list[dict[str, object]]], None]
"""Called after each measured repeat with the scenario, the repeat index and the aggregate tok/s so far.

It may raise (e.g. :class:`~tuner.errors.RegressionPruned`) to stop the scenario early; the exception
propagates out of :meth:`HttpBenchmark.run_scenario` after connections are closed.
"""

_MAX_EVIDENCE = 5
#: Times a pass is run again when the load generator, not the server, set its pace (then the last try counts).
MAX_CLIENT_RERUNS = 2


class HttpBenchmark(BaseBenchmark):
    """Benchmark a running OpenAI-compatible server over HTTP (see the module docstring).

    ``on_repeat`` lets a pruner watch repeats; ``on_requests`` gets every measured pass's requests.
    ``cpu_budget_cores`` (per process) and ``min_start_delay_s`` (the floor of the start-delay bound) set when a
    scenario is marked ``client_bound`` (see :mod:`tuner.bench._alarm`).
    """

    def __init__(
        self,
        *,
        endpoint: Endpoint,
        config: BenchmarkSection,
        on_repeat: RepeatCallback | None = None,
        on_requests: RequestsCallback | None = None,
        cpu_budget_cores: float = CPU_BUDGET_CORES,
        min_start_delay_s: float = MIN_START_DELAY_S,
        dialect: BaseServerDialect | None = None,
    ) -> None:
        self._endpoint = endpoint
        self._config = config
        self._on_repeat = on_repeat
        self._on_requests = on_requests
        self._cpu_budget = cpu_budget_cores
        self._min_delay = min_start_delay_s
        self.policy = SequentialPolicy.from_section(config)
        self.warmup_policy = WarmupPolicy.from_section(config)
        self._dialect = dialect or default_dialect()
        # Text is kept only where it will be counted: a server without stream usage but with a tokenizer.
        self._count_text = not self._dialect.stream_usage and self._dialect.tokenize_path is not None
        self._token_overhead: int | None = None
        self._measured: dict[str, _Measured] = {}

    @property
    def endpoint(self) -> Endpoint:
        return self._endpoint

    # -- public API -----------------------------------------------------------------------------------------

    def run_scenario(self, scenario: Scenario) -> ScenarioResult:
        self._resolve_model(scenario)
        return asyncio.run(self._scenario(scenario))

    def extend_scenario(self, scenario: Scenario, result: ScenarioResult) -> ScenarioResult:
        self._resolve_model(scenario)
        return asyncio.run(self._extend(scenario, result.stopped))

    # -- internals ------------------------------------------------------------------------------------------

    def _resolve_model(self, scenario: Scenario) -> None:
        if self._endpoint.model:
            return
        try:
            with httpx.Client(timeout=10.0, trust_env=False) as client:
                self._endpoint = self._endpoint.resolve_model(client)
        except httpx.HTTPError as exc:
            raise DiedUnderLoad(
                f"server not answering before scenario {scenario.name}: /v1/models failed ({exc})",
                evidence=f"{type(exc).__name__}: {exc}",
            ) from exc

    def _specs(self, scenario: Scenario, *, phase: str, repeat: int, count: int) -> list[RequestSpec]:
        seed = self.draw_seed(self._config.seed)
        if scenario.trace is not None:
            return _trace_specs(scenario, seed=seed, phase=phase, repeat=repeat, count=count)
        if scenario.prompts != "random":
            chats = [
                sample_chat(scenario.prompts, seed=prompt_seed(seed, scenario.name, phase, repeat, i))
                for i in range(count)
            ]
            return [
                RequestSpec(index=i, prompt=chat_text(m), max_tokens=scenario.output_tokens, messages=m)
                for i, m in enumerate(chats)
            ]
        return [
            RequestSpec(
                index=i,
                prompt=build_prompt(
                    tokens=scenario.prompt_tokens,
                    seed=seed,
                    scenario=scenario.name,
                    phase=phase,
                    repeat=repeat,
                    index=i,
                ),
                max_tokens=scenario.output_tokens,
            )
            for i in range(count)
        ]

    @contextlib.asynccontextmanager
    async def _session(self, scenario: Scenario) -> AsyncIterator[_Session]:
        """Clients (and client processes) for one scenario, started before anything is measured."""
        cfg = self._config
        ep = self._endpoint
        assert ep.model is not None
        target = LoadTarget(
            url=ep.url("/v1/chat/completions" if cfg.api == "chat" else "/v1/completions"),
            headers={"Content-Type": "application/json", **ep.headers},
            api=cfg.api,
            model=ep.model,
            timeout_s=cfg.request_timeout_s,
            client=stream_client(cfg.http_client),
            keep_text=self._count_text,
        )
        streams = _streams(scenario)
        processes = choose_processes(cfg.client_processes, concurrency=streams)
        if scenario.open_loop and scenario.max_concurrency is not None:
            # A cap on what is in flight is one queue: processes would each hold a share of it, and k queues of
            # cap/k wait longer than one of cap (a batch cap played by the client must queue as the server does).
            processes = 1
        async with contextlib.AsyncExitStack() as stack:
            runner = make_runner(target=target, streams=streams, processes=processes)
            stack.push_async_callback(runner.aclose)
            await runner.start()
            # The control connection (flush, counters, token counts) is never a stream: httpx, whatever streams.
            control = async_client(timeout_s=min(30.0, cfg.request_timeout_s), connections=2)
            stack.push_async_callback(control.aclose)
            probe = ServerProbe(client=control, base_url=ep.base_url, headers=ep.headers, dialect=self._dialect)
            yield _Session(runner=runner, control=control, probe=probe)

    async def _scenario(self, scenario: Scenario) -> ScenarioResult:
        cfg = self._config
        t0 = time.monotonic()
        async with self._session(scenario) as session:
            runner, probe = session.runner, session.probe
            plan = self.warmup_plan(scenario)
            first_pass: float | None = None
            t_warm = time.monotonic()
            if plan.kind == "requests":
                warm = self._specs(scenario, phase="warmup", repeat=0, count=cfg.warmup_requests)
                res = await runner.run(warm, concurrency=min(_streams(scenario), len(warm)))
                if res.failures or res.cancelled:
                    raise await self._died(scenario, res, probe, during="warm-up")
            elif plan.kind == "probe":
                first_pass = await self._probe(scenario, session)
            warmup_s = time.monotonic() - t_warm
            warmed = {"requests": cfg.warmup_requests, "probe": scenario.requests}.get(plan.kind, 0)
            measured = _Measured(
                processes=runner.processes,
                warmup=dict(warmup=plan.kind, first_pass_tok_s=first_pass, warmup_requests=warmed, warmup_s=warmup_s),
            )
            before = await probe.snapshot()
            decision = await self._repeats(scenario, session, measured)
            after = await probe.snapshot()
        measured.windows.append(_Window(before=before, after=after, runs=len(measured.runs)))
        measured.seconds = time.monotonic() - t0
        self._measured[scenario.name] = measured
        return self._result(scenario, measured).stopped_by(decision)

    async def _extend(self, scenario: Scenario, stopped: str | None) -> ScenarioResult:
        measured = self._measured.get(scenario.name)
        if measured is None:
            raise ValueError(f"scenario {scenario.name} was not measured by this benchmark: nothing to extend")
        t0 = time.monotonic()
        r = len(measured.runs)
        async with self._session(scenario) as session:
            before = await session.probe.snapshot()
            during = f"repeat {r + 1} (for the objective)"
            await self._counted_pass(scenario, session, measured, repeat=r, during=during)
            after = await session.probe.snapshot()
        measured.windows.append(_Window(before=before, after=after, runs=1))
        measured.seconds += time.monotonic() - t0
        if self._on_repeat is not None:
            self._on_repeat(scenario, r, tuple(_aggregate_tok_s(run.records) for run in measured.runs))
        return dataclasses.replace(self._result(scenario, measured), stopped=stopped)

    def _result(self, scenario: Scenario, measured: _Measured) -> ScenarioResult:
        result = self._summarise(scenario, measured, self._client_load(measured.runs, measured.processes))
        return dataclasses.replace(result, **measured.warmup)

    def _client_load(self, runs: Sequence[LoadResult], processes: int) -> ClientLoad:
        return client_load(runs, processes=processes, cpu_budget_cores=self._cpu_budget, min_delay_s=self._min_delay)

    async def _probe(self, scenario: Scenario, session: _Session) -> float:
        """One pass shaped like a repeat (its own prompts), measured as the warm-up probe, never counted."""
        if self._config.flush_cache:
            await session.probe.flush_cache()
        res = await self._pass(scenario, session, phase="warmup", repeat=0, during="warm-up")
        return _aggregate_tok_s(res.records)

    async def _repeats(self, scenario: Scenario, session: _Session, measured: _Measured) -> RepeatDecision | None:
        """``min_repeats``..``max_repeats`` counted passes, as many as the sequential policy asks for."""
        cfg = self._config
        decision: RepeatDecision | None = None
        for r in range(cfg.max_repeats):
            await self._counted_pass(scenario, session, measured, repeat=r, during=f"repeat {r + 1}/{cfg.max_repeats}")
            repeats_tok_s = [_aggregate_tok_s(run.records) for run in measured.runs]
            if self._on_repeat is not None:
                self._on_repeat(scenario, r, tuple(repeats_tok_s))
            decision = self.next_repeat(scenario, repeats_tok_s)
            if decision.stop and not self._slo_pending(scenario, measured):
                break
        return decision

    def _slo_pending(self, scenario: Scenario, measured: _Measured) -> bool:
        """Another pass for the SLO's sake (:meth:`BaseBenchmark.slo_pending`)."""
        if scenario.slo is None:
            return False
        figures = latency_figures(measured.runs, slo=scenario.slo, confidence=self._config.confidence,
                                  looks=self.slo_looks)
        return self.slo_pending(scenario, figures, len(measured.runs))

    async def _counted_pass(
        self, scenario: Scenario, session: _Session, measured: _Measured, *, repeat: int, during: str
    ) -> None:
        """One counted repeat, added to ``measured``: a pass the load generator kept up with.

        A pass whose pace the client set (its CPU over budget, or requests sent late: :mod:`tuner.bench._alarm`)
        understates the server through no fault of the config, so it is run again with fresh prompts, up to
        :data:`MAX_CLIENT_RERUNS` times; the last try counts either way, and the scenario is then marked
        client-bound with its warning, as before.
        """
        for attempt in range(MAX_CLIENT_RERUNS + 1):
            if self._config.flush_cache:
                ok = await session.probe.flush_cache()
                measured.flushed = ok if measured.flushed is None else (measured.flushed and ok)
            phase = "measure" if attempt == 0 else f"rerun-{attempt}"
            if attempt == 0:
                arm_client_stall()  # a test hook (tuner.bench._planted); nothing unless set
            res = await self._pass(scenario, session, phase=phase, repeat=repeat, during=during)
            counted = attempt == MAX_CLIENT_RERUNS or not self._client_load([res], session.runner.processes).bound
            if self._on_requests is not None:
                self._on_requests(request_rows(res, scenario=scenario, repeat=repeat, attempt=attempt, counted=counted))
            if counted:
                measured.runs.append(res)
                return
            measured.client_reruns += 1

    async def _pass(self, scenario: Scenario, session: _Session, *, phase: str, repeat: int, during: str) -> LoadResult:
        """One full pass of the scenario (its requests at its concurrency), every request accounted for."""
        cfg = self._config
        specs = self._specs(scenario, phase=phase, repeat=repeat, count=scenario.requests)
        # Open loop: the same arrivals in every trial (the benchmark seed and the repeat, never the trial's).
        arrivals = arrival_schedule(scenario, count=len(specs), seed=self.draw_seed(cfg.seed) + repeat)
        res = await session.runner.run(specs, concurrency=scenario.concurrency, arrivals=arrivals)
        if res.failures or res.cancelled or len(res.records) != len(specs):
            raise await self._died(scenario, res, session.probe, during=during)
        if self._count_text:
            await self._count_tokens(session.control, res.records)
        return res

    def _summarise(self, scenario: Scenario, measured: _Measured, client: ClientLoad) -> ScenarioResult:
        cfg = self._config
        runs = measured.runs
        records = [rec for run in runs for rec in run.records]
        repeats_tok_s = [_aggregate_tok_s(run.records) for run in runs]
        per_stream = []
        for run in runs:
            rates = [x for x in (rec.decode_tok_s for rec in run.records) if x is not None]
            if rates:
                per_stream.append(statistics.fmean(rates))
        itls = [gap for rec in records for gap in rec.itls()]
        accept, method = measured.acceptance()
        expected = _expected_tokens(scenario)
        prompt_counts = [rec.prompt_tokens for rec in records if rec.prompt_tokens is not None]
        return ScenarioResult.from_repeats(
            scenario=scenario,
            repeats_tok_s=repeats_tok_s,
            repeats_per_stream_tok_s=per_stream,
            confidence=cfg.confidence,
            noise=self.noise(scenario),
            **latency_figures(runs, slo=scenario.slo, confidence=cfg.confidence, looks=self.slo_looks),
            itl_p50_s=percentile(itls, 50),
            itl_p99_s=percentile(itls, 99),
            accept_length=accept,
            requests=len(records),
            errors=0,
            seconds=measured.seconds,
            accept_method=method,
            output_tokens=sum(rec.output_tokens for rec in records),
            tokens_from_usage=all(rec.tokens_from_usage for rec in records),
            short_requests=sum(1 for rec in records if rec.output_tokens < expected(rec.index)),
            prompt_tokens=statistics.fmean(prompt_counts) if prompt_counts else None,
            cache_flushed=measured.flushed,
            client_reruns=measured.client_reruns,
            client_bound=client.bound,
            client_bound_by=client.reason,
            client_cpu_cores=client.cpu_cores,
            client_busiest_process_cores=client.busiest_process_cores,
            start_delay_p99_s=client.start_delay_p99_s,
            client_stall_s=client.longest_stall_s,
            client_processes=client.processes,
        )

    async def _count_tokens(self, client: httpx.AsyncClient, records: Sequence[RequestRecord]) -> None:
        """Count estimated outputs with the server's tokenizer (after the run: outside the timed window).

        A tokenizer endpoint may add a BOS token to every text it counts: what it says for the empty text is
        that overhead, asked once and subtracted.
        """
        if self._token_overhead is None:
            self._token_overhead = await self._server_count(client, "") or 0
        for rec in records:
            if rec.tokens_from_usage or not rec.text:
                continue
            count = await self._server_count(client, rec.text)
            if count is not None and count > self._token_overhead:
                recount(rec, count - self._token_overhead)

    async def _server_count(self, client: httpx.AsyncClient, text: str) -> int | None:
        d = self._dialect
        assert d.tokenize_path is not None
        body = d.token_count_request(text, self._endpoint.model or "default")
        try:
            r = await client.post(self._endpoint.url(d.tokenize_path), json=body, headers=self._endpoint.headers)
            return d.token_count(r.json()) if r.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None

    async def _died(self, scenario: Scenario, res: LoadResult, probe: ServerProbe, *, during: str) -> DiedUnderLoad:
        failed = res.failures
        kinds = Counter(rec.error_kind or "unknown" for rec in failed)
        if kinds:
            kind_text = ", ".join(kind if i == 0 else f"{n} {kind}" for i, (kind, n) in enumerate(kinds.most_common()))
        else:
            kind_text = "requests cancelled"
        alive = await probe.alive()
        reason = (
            f"died under load in scenario {scenario.name}: {len(failed)}/{max(res.started, len(failed))} "
            f"requests failed ({kind_text})"
        )
        if not alive:
            reason += f"; the server no longer answers {probe.alive_path}"
        lines = [f"during {during}; {res.cancelled} in-flight request(s) cancelled after the first failure"]
        first = sorted(failed, key=lambda rec: rec.t_end)[:_MAX_EVIDENCE]
        for rec in first:
            lines.append(
                f"request #{rec.index} failed after {rec.t_end - rec.t_start:.2f} s "
                f"({rec.output_tokens} tokens delivered): {rec.error}"
            )
        lines.append(f"{probe.alive_path} after the failures: {'200' if alive else 'no answer'}")
        return DiedUnderLoad(reason, evidence="\n".join(lines))


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Session:
    runner: LoadRunner
    control: httpx.AsyncClient
    probe: ServerProbe


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Window:
    """Counters around measured runs (the first window holds the scenario's repeats, each later one one more)."""

    before: ServerSnapshot
    after: ServerSnapshot
    runs: int


@dataclasses.dataclass(kw_only=True)
class _Measured:
    """Everything measured of one scenario so far, so a later repeat can join its summary."""

    processes: int
    warmup: dict[str, Any]
    runs: list[LoadResult] = dataclasses.field(default_factory=list)
    windows: list[_Window] = dataclasses.field(default_factory=list)
    flushed: bool | None = None
    seconds: float = 0.0
    client_reruns: int = 0

    def acceptance(self) -> tuple[float | None, str | None]:
        """Acceptance length over every window, weighted by the output tokens measured in each."""
        found: list[tuple[float, int, str]] = []
        start = 0
        for window in self.windows:
            tokens = sum(rec.output_tokens for run in self.runs[start : start + window.runs] for rec in run.records)
            start += window.runs
            accept, method = acceptance_between(window.before, window.after)
            if accept is not None and method is not None:
                found.append((accept, max(tokens, 1), method))
        if not found:
            return None, None
        total = sum(tokens for _, tokens, _ in found)
        return sum(a * tokens for a, tokens, _ in found) / total, found[0][2]


#: Clients opened before an open-loop scenario's window (more open on demand, see tuner.bench._load): enough for
#: the requests in flight of a server that keeps up with its arrivals.
OPEN_LOOP_STREAMS = 32


def _streams(scenario: Scenario) -> int:
    """Clients a scenario's runner holds: its streams (closed loop), its open-loop pool otherwise."""
    if not scenario.open_loop:
        return scenario.concurrency
    return min(scenario.concurrency, OPEN_LOOP_STREAMS)


def _trace_specs(scenario: Scenario, *, seed: int, phase: str, repeat: int, count: int) -> list[RequestSpec]:
    """A trace's requests: its chats (tagged like a workload's), or random words of its input lengths."""
    assert scenario.trace is not None
    out = []
    for i, line in enumerate(load_trace(scenario.trace)[:count]):
        max_tokens = line.output_length or scenario.output_tokens
        key = prompt_seed(seed, scenario.name, phase, repeat, i)
        if line.messages is not None:
            messages = tag_chat(line.messages, seed=key)
            out.append(RequestSpec(index=i, prompt=chat_text(messages), max_tokens=max_tokens, messages=messages))
            continue
        assert line.input_length is not None
        prompt = build_prompt(
            tokens=line.input_length, seed=seed, scenario=scenario.name, phase=phase, repeat=repeat, index=i
        )
        out.append(RequestSpec(index=i, prompt=prompt, max_tokens=max_tokens))
    return out


def _expected_tokens(scenario: Scenario) -> Callable[[int], int]:
    """The answer length request ``index`` asked for."""
    if scenario.trace is None:
        return lambda index: scenario.output_tokens
    lines = load_trace(scenario.trace)
    return lambda index: lines[index].output_length or scenario.output_tokens


def _aggregate_tok_s(records: Sequence[RequestRecord]) -> float:
    """Output tokens of a run over its window: first request sent to last request finished."""
    if not records:
        return 0.0
    span = max(r.t_end for r in records) - min(r.t_start for r in records)
    tokens = sum(r.output_tokens for r in records)
    return tokens / span if span > 0 and math.isfinite(span) else 0.0
