"""Ground truth for search benchmarks: what a config's scenarios yield in the simulator's noise-free model.

:func:`model_scenario` is the in-process benchmark without noise: the simulated engine's closed loop (waves of
at most ``--max-running-requests`` requests, each paying its prefill then ``output / acceptance`` decode
steps of :func:`tuner.sim.step_time_s`), so the same figure is what the HTTP demo measures against
``python -m tuner.sim`` (up to noise and client overhead). :func:`true_objective` scores a parameter set as the
study would, with failures and wrong answers at 0; :func:`true_optimum` finds the best one by enumerating the
space (about 860k configs for the demo, in seconds: only cheap model functions run per config).
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import redirect_stderr
from dataclasses import dataclass
from functools import lru_cache
from io import StringIO
from typing import Any

import numpy as np

from tuner.config import Scenario, StudyConfig
from tuner.metrics import objective_value
from tuner.sim import (
    ServerConfig,
    acceptance_length,
    corrupts_code,
    max_concurrent_requests,
    startup_failure,
    step_time_s,
    workload_kind,
)
from tuner.sim._engine import PREFILL_S_PER_TOKEN
from tuner.space import Param, SearchSpace, Value, iter_configs, param_values, render
from tuner.spec import LaunchSpec
from tuner.target import base_spec

__all__ = [
    "ModelledScenario",
    "Variant",
    "model_scenario",
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
    """Aggregate output tokens/s over the scenario (0 when the server dies)."""
    per_stream_tok_s: float
    """Decode speed of one running request."""
    accept_length: float
    seconds: float
    """Modelled duration of one repeat of the scenario."""
    died: str | None = None
    """Why the server dies under this load (a CUDA OOM mid-batch), or None."""

    @property
    def output_tok_s(self) -> float:
        """The benchmark's name for :attr:`tok_s` (so the metric registry reads both alike)."""
        return self.tok_s


def parse_server_config(spec: LaunchSpec) -> ServerConfig:
    """The model's view of a launch spec: server flags after the program (``python -m tuner.sim``) part.

    Raises ``ValueError`` with the parser's message when the server would reject the command line.
    """
    argv = list(spec.argv)
    first_flag = next((i for i, a in enumerate(argv) if a.startswith("--")), len(argv))
    err = StringIO()
    try:
        with redirect_stderr(err):
            return ServerConfig.from_argv(argv[first_flag:], spec.env)
    except SystemExit:  # argparse's way of rejecting a command line, as the real server does
        raise ValueError(err.getvalue().strip() or "invalid server arguments") from None


@lru_cache(maxsize=65536)
def _acceptance(
    algorithm: str | None, budget: int, topk: int, block: int, window: int | None, ctx: int, workload: str = "code"
) -> float:
    # Acceptance depends on these fields only (tuner.sim._model: drafter quality and the draft tree), and is
    # the one expensive model function (a best-first tree search): cache it across configs.
    cfg = ServerConfig(
        algorithm=algorithm, ddtree_budget=budget, ddtree_topk=topk, block_size=block, draft_window=window
    )
    return acceptance_length(cfg, context_tokens=ctx, workload=workload)


def _accept(cfg: ServerConfig, ctx: int, workload: str = "code") -> float:
    return _acceptance(
        cfg.algorithm, cfg.ddtree_budget, cfg.ddtree_topk, cfg.block_size, cfg.draft_window, ctx, workload
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


def model_scenario(cfg: ServerConfig, scenario: Scenario) -> ModelledScenario:
    """Noise-free aggregate output tok/s of ``scenario`` against a server running ``cfg``.

    ``requests`` requests from ``concurrency`` closed-loop streams run in waves of at most
    ``max_running_requests``; each wave pays its prefill, then ``output_tokens / acceptance`` engine steps at
    the mean context of a request (prompt + half its output). The server dies when a wave's requests need
    more KV than the pool holds at their peak context.
    """
    running = min(scenario.concurrency, cfg.max_running_requests)
    ctx_mean = scenario.prompt_tokens + scenario.output_tokens // 2
    ctx_peak = scenario.prompt_tokens + scenario.output_tokens
    accept = _accept(cfg, ctx_mean, scenario_workload(scenario.prompts))
    if running > max_concurrent_requests(cfg, context_tokens=ctx_peak):
        return ModelledScenario(
            tok_s=0.0,
            per_stream_tok_s=0.0,
            accept_length=accept,
            seconds=0.0,
            died=f"CUDA out of memory with {running} running requests of {ctx_peak} tokens",
        )
    full, rest = divmod(scenario.requests, running)
    steps = scenario.output_tokens / accept
    seconds = 0.0
    for n, count in ((running, full), (rest, 1 if rest else 0)):
        if count:
            wave = PREFILL_S_PER_TOKEN * scenario.prompt_tokens * n + steps * step_time_s(
                cfg, running=n, context_tokens=ctx_mean
            )
            seconds += count * wave
    per_stream = accept / step_time_s(cfg, running=running, context_tokens=ctx_mean)
    return ModelledScenario(
        tok_s=scenario.requests * scenario.output_tokens / seconds,
        per_stream_tok_s=per_stream,
        accept_length=accept,
        seconds=seconds,
    )


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
        m = model_scenario(cfg, s)
        if m.died is not None:
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
    spec = render(config.space, base_spec(config.target), params)
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

    Every parameter owns some ServerConfig fields; what it sets for each value is learned once by rendering
    and parsing, then combined with ``dataclasses.replace``. The decomposition is checked against the full
    render + parse on a sample, so a space where it does not hold (two parameters writing one field) is
    refused instead of mis-scored.
    """

    def __init__(self, config: StudyConfig) -> None:
        self._space = config.space
        self._base = base_spec(config.target)
        self.empty = parse_server_config(render(self._space, self._base, {}))
        self._sets: dict[tuple[str, Value], dict[str, Any]] = {}
        for p in self._space.params:
            for v in _values(p):
                context = self._enabling(p)
                cfg = parse_server_config(render(self._space, self._base, {**context, p.name: v}))
                without = dataclasses.asdict(parse_server_config(render(self._space, self._base, context)))
                fields = dataclasses.asdict(cfg)
                self._sets[(p.name, v)] = {k: fields[k] for k in fields if fields[k] != without[k]}

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
