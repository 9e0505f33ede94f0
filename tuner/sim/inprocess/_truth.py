"""Ground truth for search benchmarks: what a config's scenarios yield in the simulator's noise-free model.

:func:`model_scenario` is the in-process benchmark without noise: the simulated scheduler's closed loop
(:mod:`tuner.sim._scheduler`: waves of at most ``--max-running-requests`` requests, each paying its prefill then
one :func:`tuner.sim.step_time_s` per verify step; where the KV pool cannot hold a wave, requests wait and are
retracted, which makes the config slower), so the same figure is what the HTTP demo measures against
``python -m tuner.sim`` (up to noise and client overhead). :func:`true_objective` scores a parameter set as the
study would, with failures and wrong answers at 0; :func:`true_optimum` finds the best one by enumerating the
space (about 860k configs for the demo, in seconds: only cheap model functions run per config).
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import redirect_stderr
from dataclasses import dataclass
from functools import lru_cache
from io import StringIO
from typing import Any

import numpy as np

from tuner.bench import LoadResult, RequestRecord, arrival_schedule, goodput_fields, latency_figures
from tuner.config import Scenario, StudyConfig, base_spec, load_trace, spec_for
from tuner.metrics import objective_value
from tuner.sim import ServerConfig, acceptance_length, corrupts_code, step_time_s, workload_kind
from tuner.sim._args import parse_server_args
from tuner.sim._model import (
    cuda_graph_max_bs,
    kv_pool_gb,
    max_input_tokens,
    request_memory_gb,
    startup_failure,
    verify_width,
)
from tuner.sim._scheduler import CTX_BUCKET, INIT_NEW_TOKEN_RATIO, PREFILL_S_PER_TOKEN, simulate_open, simulate_scenario
from tuner.sim._versions import EmulatedVersion
from tuner.slo import MISSED
from tuner.space import Param, SearchSpace, Value, iter_configs, param_values, render
from tuner.spec import LaunchSpec

__all__ = [
    "ModelledScenario",
    "Variant",
    "model_scenario",
    "parse_launch",
    "parse_server_config",
    "true_objective",
    "true_optimum",
]

Variant = Callable[[ServerConfig, Scenario, "ModelledScenario"], "ModelledScenario"]
"""Another server's figures from the model's (:class:`tuner.sim.inprocess.ModelVariant`)."""

#: Points per continuous float parameter without a ``step`` when enumerating (the optimum is then approximate).
FLOAT_GRID_POINTS = 21


@dataclass(frozen=True, kw_only=True)
class ModelledScenario:
    """One scenario's noise-free outcome for one config."""

    tok_s: float
    """Aggregate output tokens/s over the scenario (0 when its requests fail)."""
    per_stream_tok_s: float
    """Decode speed of one running request."""
    accept_length: float
    """What SGLang's counters give for the scenario: generated tokens per verify call."""
    seconds: float
    """Modelled duration of one repeat of the scenario."""
    retractions: tuple[str, ...] = ()
    """The scheduler's ``KV cache pool is full. Retract requests.`` lines (the config is slower, not broken)."""
    died: str | None = None
    """Why the scenario's requests fail (refused, aborted, or the server crashed), or None."""
    crashed: bool = False
    """Whether that failure takes the server down (``--sim-crash-above-batch-tokens``)."""
    latency: Mapping[str, float | None] = dataclasses.field(default_factory=dict)
    """Open loop: TTFT/TPOT/E2E percentiles and the offered/achieved rates, by their ScenarioResult fields."""
    tokens_per_request: float | None = None
    """Closed loop: output tokens per request (the completion rate is the throughput over it)."""
    records: tuple[RequestRecord, ...] = ()
    """Open loop: the modelled requests as the client would have recorded them (the figures in :attr:`latency`
    are theirs; a benchmark of several passes pools them)."""

    @property
    def output_tok_s(self) -> float:
        """The benchmark's name for :attr:`tok_s` (so the metric registry reads both alike)."""
        return self.tok_s

    @property
    def goodput_rps(self) -> float | None:
        """Requests/s that met the SLO, as the benchmark defines it (the metric registry reads it)."""
        return self._goodput()["goodput_rps"]

    @property
    def goodput_tok_s(self) -> float | None:
        return self._goodput()["goodput_tok_s"]

    def _goodput(self) -> dict[str, float | None]:
        return goodput_fields(point=self.tok_s, score=self.tok_s, figures=self.latency,
                              tokens_per_request=self.tokens_per_request)  # fmt: skip


def parse_launch(spec: LaunchSpec) -> tuple[ServerConfig, EmulatedVersion, list[str]]:
    """Parse a launch spec's server flags (after the program part, ``python -m tuner.sim``) as the simulator does:
    the model config, the SGLang version it emulates and the warnings SGLang logs while resolving.

    Raises ``ValueError`` with the parser's message when it rejects the command line (exit status 2), and
    :class:`tuner.sim.ServerArgsError` (a ``ValueError``) with SGLang's message when it rejects it after parsing.
    """
    argv = list(spec.argv)
    first_flag = next((i for i, a in enumerate(argv) if a.startswith("--")), len(argv))
    err = StringIO()
    try:
        with redirect_stderr(err):
            args = parse_server_args(argv[first_flag:], spec.env)
    except SystemExit:  # argparse's way of rejecting a command line, as the real server does
        raise ValueError(err.getvalue().strip() or "invalid server arguments") from None
    return ServerConfig.from_namespace(args), args.sglang_version, list(args.resolution_warnings)


def parse_server_config(spec: LaunchSpec) -> ServerConfig:
    """The model's view of a launch spec (:func:`parse_launch`'s config; the same errors)."""
    return parse_launch(spec)[0]


@lru_cache(maxsize=65536)
def _acceptance(cfg: ServerConfig, ctx_bucket: int, workload: str) -> float:
    # Acceptance is the one expensive model function (a best-first tree search): cache it across configs on the
    # fields it reads, so configs differing only in memory settings share it.
    return acceptance_length(cfg, context_tokens=ctx_bucket * CTX_BUCKET, workload=workload)


def _accept_key(cfg: ServerConfig) -> ServerConfig:
    return ServerConfig(
        algorithm=cfg.algorithm,
        block_size=cfg.block_size,
        drafter_block_size=cfg.drafter_block_size,
        ddtree_budget=cfg.ddtree_budget,
        ddtree_topk=cfg.effective_topk if cfg.algorithm == "DDTREE" else 1,
        draft_window=cfg.draft_window,
    )


@lru_cache(maxsize=256)
def scenario_workload(prompts: str) -> str:
    """What the HTTP simulator would see in a scenario's requests: random words are prose, HumanEval is code,
    a chat file is whatever most of its chats look like (:func:`tuner.sim.workload_kind`)."""
    if prompts == "random":
        return "prose"
    if prompts == "humaneval":
        return "code"
    from tuner.config import load_chats

    kinds = [workload_kind("\n".join(c for _, c in chat)) for chat in load_chats(prompts)]
    return "code" if kinds.count("code") * 2 > len(kinds) else "prose"


@dataclass(frozen=True)
class _Wave:
    seconds: float
    """Expected duration: prefill, then the steps until the wave's last request is done."""
    steps: float
    """Expected verify steps of one request."""
    step_seconds: float


def _step_key(cfg: ServerConfig) -> ServerConfig:
    """The fields :func:`tuner.sim.step_time_s` reads (the captured batch size as the running limit)."""
    return ServerConfig(
        algorithm=cfg.algorithm,
        block_size=cfg.block_size,
        ddtree_budget=cfg.ddtree_budget,
        ddtree_topk=cfg.effective_topk if cfg.algorithm == "DDTREE" else 1,
        num_continuous_decode_steps=cfg.num_continuous_decode_steps,
        tp_size=cfg.tp_size,
        max_running_requests=cuda_graph_max_bs(cfg),
    )


@lru_cache(maxsize=262144)
def _wave(step_key: ServerConfig, accept_key: ServerConfig, workload: str, n: int, prompt: int, output: int) -> _Wave:
    """``n`` identical requests admitted together and decoded side by side, in expectation.

    A request that accepts ``a`` tokens per step, starting from a fraction ``U`` (the engine's start from a hash of
    the prompt: uniform over a benchmark's prompts), is done after ``ceil((N - U) / a)`` steps: ``k`` or ``k - 1``,
    the latter with probability ``1 - p``. The wave lasts until its last request is done: ``k - 1 + 1 - (1 -
    p)**n`` steps in expectation. Acceptance and step time are taken at the wave's mean context.
    """
    bucket = (prompt + output // 2) // CTX_BUCKET
    a = max(1.0, _acceptance(accept_key, bucket, workload))
    k = math.ceil(output / a)
    p = min(1.0, output - (k - 1) * a)
    step = step_time_s(step_key, running=n, context_tokens=bucket * CTX_BUCKET)
    last = k - 1 + (1.0 - (1.0 - p) ** n)
    return _Wave(seconds=PREFILL_S_PER_TOKEN * prompt * n + last * step, steps=k - 1 + p, step_seconds=step)


@dataclass(frozen=True)
class _Facts:
    """What the scenario model reads from one config, computed once per config."""

    akey: ServerConfig
    skey: ServerConfig
    pool_gb: float
    input_limit: int


@lru_cache(maxsize=65536)
def _facts(cfg: ServerConfig) -> _Facts:
    return _Facts(
        akey=_accept_key(cfg), skey=_step_key(cfg), pool_gb=kv_pool_gb(cfg), input_limit=max_input_tokens(cfg)
    )


@lru_cache(maxsize=65536)
def _wave_memory(akey: ServerConfig, width: int, n: int, prompt: int, output: int) -> tuple[float, float]:
    """KV a wave of ``n`` requests reserves when admitted, and needs at its last verify step."""
    admit = n * request_memory_gb(akey, context_tokens=prompt + math.ceil(INIT_NEW_TOKEN_RATIO * output))
    peak = n * request_memory_gb(akey, context_tokens=prompt + output + width)
    return admit, peak


def _lockstep_fits(cfg: ServerConfig, facts: _Facts, n: int, prompt: int, output: int) -> bool:
    """Whether waves of ``n`` run without the scheduler holding any back or retracting (the fast path's premise)."""
    admit, peak = _wave_memory(facts.akey, verify_width(facts.skey), n, prompt, output)
    crash = cfg.crash_above_tokens is not None and n * (prompt + output) > cfg.crash_above_tokens
    return max(admit, peak) <= facts.pool_gb and not crash


def model_scenario(
    cfg: ServerConfig, scenario: Scenario, *, seed: int = 0, confidence: float = 0.8
) -> ModelledScenario:
    """Noise-free outcome of ``scenario`` against a server running ``cfg``: the simulated scheduler's run.

    ``requests`` requests from ``concurrency`` closed-loop streams; while the KV pool holds every wave of at most
    ``max_running_requests`` requests they run in lockstep waves (computed per wave); otherwise the scheduler
    (:func:`tuner.sim.simulate_scenario`) runs them, holding requests back and retracting some as SGLang would.
    An open-loop scenario's requests arrive on the schedule the HTTP benchmark draws from the benchmark ``seed``
    and queue while the batch is full (:func:`tuner.sim.simulate_open`); with an SLO, its attainment (interval at
    ``confidence``) is judged on the modelled requests.
    """
    prompt, output = scenario.prompt_tokens, scenario.output_tokens
    workload = scenario_workload(scenario.prompts)
    facts = _facts(cfg)
    if prompt >= facts.input_limit:
        reason = f"Input length ({prompt} tokens) exceeds the maximum allowed length ({facts.input_limit} tokens)"
        return _failed(reason, _acceptance(facts.akey, 0, workload))
    if scenario.open_loop:
        return _open_loop(cfg, facts.akey, scenario, seed, confidence)
    n = min(scenario.concurrency, cfg.max_running_requests)
    shape = (workload, scenario.concurrency, scenario.requests, prompt, output)
    if _lockstep_fits(cfg, facts, n, prompt, output):
        return _lockstep(facts.akey, facts.skey, n, shape)
    if cfg.algorithm == "DDTREE" and cfg.ddtree_topk != facts.akey.ddtree_topk:  # one run for every cap above the width
        cfg = dataclasses.replace(cfg, ddtree_topk=facts.akey.ddtree_topk)
    return _scheduled(cfg, facts.akey, shape)


@lru_cache(maxsize=262144)
def _lockstep(
    akey: ServerConfig, skey: ServerConfig, n: int, shape: tuple[str, int, int, int, int]
) -> ModelledScenario:
    workload, _, requests, prompt, output = shape
    full, rest = divmod(requests, n)
    wave = _wave(skey, akey, workload, n, prompt, output)
    seconds, steps = full * wave.seconds, full * n * wave.steps
    if rest:
        last = _wave(skey, akey, workload, rest, prompt, output)
        seconds, steps = seconds + last.seconds, steps + rest * last.steps
    return ModelledScenario(
        tok_s=requests * output / seconds,
        per_stream_tok_s=output / (wave.steps * wave.step_seconds),
        accept_length=requests * output / steps,
        seconds=seconds,
        tokens_per_request=output,
    )


@lru_cache(maxsize=65536)
def _scheduled(cfg: ServerConfig, akey: ServerConfig, shape: tuple[str, int, int, int, int]) -> ModelledScenario:
    workload, concurrency, requests, prompt, output = shape

    def accept(bucket: int) -> float:
        return _acceptance(akey, bucket, workload)

    run = simulate_scenario(
        cfg,
        concurrency=concurrency,
        requests=requests,
        prompt_tokens=prompt,
        output_tokens=output,
        accept=accept,
    )
    lines = tuple(line for r in run.retractions for line in r.log_lines())
    if run.failed is not None:
        return _failed(run.failed, accept(0), retractions=lines, crashed=run.failed.startswith("crashed"))
    return ModelledScenario(
        tok_s=run.generated / run.seconds,
        per_stream_tok_s=run.generated / run.request_seconds,
        accept_length=run.generated / max(1, run.verify_steps),
        seconds=run.seconds,
        retractions=lines,
        tokens_per_request=output,
    )


def _open_lengths(scenario: Scenario) -> tuple[list[int], list[int]]:
    """Each request's prompt and answer length: a trace's own, else the scenario's."""
    n = scenario.requests
    if scenario.trace is None:
        return [scenario.prompt_tokens] * n, [scenario.output_tokens] * n
    lines = load_trace(scenario.trace)[:n]
    prompts = [line.input_length or scenario.prompt_tokens for line in lines]
    return prompts, [line.output_length or scenario.output_tokens for line in lines]


@lru_cache(maxsize=65536)
def _open_loop(
    cfg: ServerConfig, akey: ServerConfig, scenario: Scenario, seed: int, confidence: float
) -> ModelledScenario:
    workload = scenario_workload(scenario.prompts)

    def accept(bucket: int) -> float:
        return _acceptance(akey, bucket, workload)

    arrivals = arrival_schedule(scenario, count=scenario.requests, seed=seed) or []
    prompts, outputs = _open_lengths(scenario)
    run = simulate_open(
        cfg, arrivals=arrivals, prompt_tokens=prompts, output_tokens=outputs, accept=accept,
        max_concurrency=scenario.max_concurrency,
    )  # fmt: skip
    lines = tuple(line for r in run.retractions for line in r.log_lines())
    if run.failed is not None:
        return _failed(run.failed, accept(0), retractions=lines, crashed=run.failed.startswith("crashed"))
    times = run.requests
    end = max(t.finish for t in times)
    # The model's requests as the client would have recorded them: one definition of every figure (bench).
    records = [
        RequestRecord(index=i, t_start=t.arrival, t_scheduled=t.arrival, t_sent=t.arrival, t_first=t.first_token,
                      t_end=t.finish, output_tokens=t.tokens)
        for i, t in enumerate(times)
    ]  # fmt: skip
    run_records = [LoadResult(records=records, started=len(records))]
    latency = latency_figures(run_records, slo=scenario.slo, confidence=confidence)
    tpots = [x for x in (r.tpot_s for r in records) if x is not None]
    return ModelledScenario(
        tok_s=run.generated / end if end > 0 else 0.0,
        per_stream_tok_s=1.0 / statistics.fmean(tpots) if tpots else 0.0,
        accept_length=run.generated / max(1, run.verify_steps),
        seconds=end,
        retractions=lines,
        latency=latency,
        records=tuple(records),
    )


def _failed(
    reason: str, accept: float, *, retractions: tuple[str, ...] = (), crashed: bool = False
) -> ModelledScenario:
    return ModelledScenario(
        tok_s=0.0,
        per_stream_tok_s=0.0,
        accept_length=accept,
        seconds=0.0,
        retractions=retractions,
        died=reason,
        crashed=crashed,
    )


def _misses_slo(scenario: Scenario, m: ModelledScenario) -> bool:
    """Whether the modelled requests confidently miss the scenario's SLO: the study's rule (an infeasible trial),
    on the noise-free requests the in-process benchmark judges too."""
    return scenario.slo is not None and m.latency.get("slo_verdict") == MISSED


def _objective(cfg: ServerConfig, config: StudyConfig, variant: Variant | None = None) -> float:
    """The study's scalar objective for ``cfg`` without noise; 0.0 when the trial would fail or be infeasible.

    ``variant``: another server's figures (:class:`tuner.sim.inprocess.ModelVariant`) instead of the model's."""
    if startup_failure(cfg) is not None:
        return 0.0
    gate = config.gate
    if gate is not None and gate.enabled and gate.min_passed > 0 and corrupts_code(cfg):
        return 0.0
    per: dict[str, float] = {}
    for s in config.benchmark.scenarios:  # every scenario runs, so a death in any of them fails the config
        m = model_scenario(cfg, s, seed=config.benchmark.seed, confidence=config.benchmark.confidence)
        if m.died is not None or _misses_slo(s, m):
            return 0.0
        per[s.name] = objective_value(variant(cfg, s, m) if variant else m, config.objective.metric)
    # As tuner.study.score: a weighted geometric mean (also the scalar summary of a multi-objective study).
    weights = {s.name: s.weight for s in config.benchmark.scenarios if s.weight > 0}
    total = sum(weights.values())
    return math.exp(sum(w * math.log(max(per[n], 1e-9)) for n, w in weights.items()) / total)


def true_objective(config: StudyConfig, params: Mapping[str, Value], variant: Variant | None = None) -> float:
    """Noise-free value of ``params`` under ``config``'s objective (0.0: fails to start, dies, or is wrong).

    For a multi-objective study this is the weighted geometric mean of the scenarios (its scalar summary).
    """
    spec = spec_for(config, params)
    try:
        cfg = parse_server_config(spec)
    except ValueError:
        return 0.0  # the server rejects its command line: a failed start
    return _objective(cfg, config, variant)


# -- the optimum ------------------------------------------------------------------------------------------------


def _values(p: Param) -> list[Value]:
    """The space's own grid of ``p``; a continuous float on a grid of FLOAT_GRID_POINTS."""
    values = param_values(p)
    if values is not None:
        return values
    assert p.low is not None and p.high is not None
    return [float(v) for v in np.linspace(p.low, p.high, FLOAT_GRID_POINTS)]


def _enumerate(space: SearchSpace) -> Iterator[dict[str, Value]]:
    """Every parameter set of the space (active parameters only), constraints included."""
    if all(param_values(p) is not None for p in space.params):
        yield from iter_configs(space)
        return
    yield from iter_configs(dataclasses.replace(space, params=tuple(_gridded(p) for p in space.params)))


def _gridded(p: Param) -> Param:
    """``p`` with a continuous float given a step of FLOAT_GRID_POINTS points over its range."""
    if param_values(p) is not None or p.low is None or p.high is None:
        return p
    return dataclasses.replace(p, step=(p.high - p.low) / (FLOAT_GRID_POINTS - 1))


class _FastConfigs:
    """Params -> ServerConfig without argparse per config (which would take minutes over ~1M configs).

    Every parameter owns the ServerConfig fields that change with its value (in the context that makes it
    active, every other parameter absent); what each value sets there is learned once by rendering and parsing,
    then combined with ``dataclasses.replace``. The decomposition is checked against the full render + parse on
    a sample, so a space where it does not hold (two parameters writing one field) is refused instead of
    mis-scored.
    """

    def __init__(self, config: StudyConfig) -> None:
        self._space = config.space
        self._base = base_spec(config.target)
        self.empty = parse_server_config(render(self._space, self._base, {}))
        self._sets: dict[tuple[str, Value], dict[str, Any]] = {}
        for p in self._space.params:
            context = self._enabling(p)
            made = {
                v: dataclasses.asdict(parse_server_config(render(self._space, self._base, {**context, p.name: v})))
                for v in _values(p)
            }
            first = next(iter(made.values()))
            owned = [k for k in first if len({repr(fields[k]) for fields in made.values()}) > 1]
            for v, fields in made.items():
                self._sets[(p.name, v)] = {k: fields[k] for k in owned}

    def _enabling(self, p: Param) -> dict[str, Value]:
        """Values of earlier parameters that make ``p`` active (its conditions' first allowed values)."""
        return {c.param: c.values[0] for c in p.when}

    def __call__(self, params: Mapping[str, Value]) -> ServerConfig:
        changes: dict[str, Any] = {}
        for name, value in params.items():
            changes.update(self._sets[(name, value)])
        return dataclasses.replace(self.empty, **changes)

    def check(self, sample: Sequence[Mapping[str, Value]]) -> None:
        for params in sample:
            slow = parse_server_config(render(self._space, self._base, params))
            if slow != self(params):
                raise ValueError(f"parameters of this space do not map to independent server fields: {dict(params)}")


def true_optimum(config: StudyConfig, variant: Variant | None = None) -> tuple[float, dict[str, Value]]:
    """The best noise-free objective value over the whole space and the parameters reaching it.

    Enumerates every parameter set (floats on their ``step`` grid, or on a 21-point grid without one).
    Configs that fail to start are skipped before any scenario is modelled; everything else costs a few
    microseconds of arithmetic, so the demo's ~860k configs take seconds.
    """
    fast = _FastConfigs(config)
    all_params = list(_enumerate(config.space))
    if not all_params:
        raise ValueError("the search space is empty (every parameter set violates a constraint)")
    fast.check(random.Random(0).sample(all_params, min(200, len(all_params))))
    best_value, best_params = -1.0, all_params[0]
    for params in all_params:
        value = _objective(fast(params), config, variant)
        if value > best_value:
            best_value, best_params = value, params
    return best_value, dict(best_params)
