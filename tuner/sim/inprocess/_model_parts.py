"""The in-process fast path: the study's own objective code against the simulator's model instead of HTTP.

``run_study(config, target=model_target(...), parts_factory=model_parts)`` runs the very same
:class:`tuner.study.TrialRunner` story (apply -> restart -> ready -> gate -> benchmark -> score, pruning and
failure evidence included), but the server is a model object: a restart parses the launch spec with the
simulator's own argument parser, a startup failure leaves a dead "process" whose log holds the traceback the
simulator would print, a benchmark returns the model's tok/s times seeded noise, and a config that runs out
of KV memory under load dies mid-scenario. A trial takes milliseconds, so search strategies can be compared
over many seeds (``scripts/bench_search.py``); a :class:`VirtualClock` keeps the seconds each trial would have
taken on the real server.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import random
import shlex
import statistics
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.bench import BaseBenchmark, LoadResult, ScenarioResult, WarmupPolicy, latency_figures
from tuner.config import BenchmarkSection, GateSection, ReadinessSection, Scenario, StudyConfig, base_spec
from tuner.endpoint import Endpoint
from tuner.errors import DiedUnderLoad, StartFailed
from tuner.gate import BaseGate, GateResult, ProblemOutcome, check_gate
from tuner.sim import ServerConfig, corrupts_code
from tuner.sim._args import ServerArgsError
from tuner.sim._model import capture_seconds, startup_seconds
from tuner.sim._startup import (
    READY_LINE,
    capture_begin_lines,
    capture_end_lines,
    capture_failure_text,
    load_begin_lines,
    load_end_lines,
)
from tuner.sim.inprocess._truth import ModelledScenario, Variant, model_scenario, parse_launch
from tuner.spec import LaunchSpec, program_part
from tuner.stats import RepeatDecision, SequentialPolicy
from tuner.study import Console, TrialParts, run_study
from tuner.target import Target, open_target
from tuner.target.readiness import LogWatch, Ready
from tuner.target.services import BaseService, Finding, LogChunk, Preflight, ProcessIdentity, Restarted, ServiceState

Progress = Callable[[str], None]

__all__ = [
    "InProcessRun",
    "ModelBenchmark",
    "ModelGate",
    "ModelService",
    "VirtualClock",
    "model_parts",
    "model_readiness",
    "model_target",
    "run_inprocess",
]

#: Seconds a real Kimi K2.6 checkpoint (~590 GB) takes to load: what a restart "would have cost".
REAL_LOAD_TIME_S = 360.0
#: Tokens of one gate answer (reasoning + code) from a thinking model, for the gate's modelled duration.
GATE_ANSWER_TOKENS = 600
GATE_PROMPT_TOKENS = 300


class VirtualClock:
    """Modelled seconds per trial (keyed by the restart label, e.g. ``trial-0007``) and per activity."""

    def __init__(self) -> None:
        self._by_label: dict[str, dict[str, float]] = {}
        self._current: str | None = None

    def start(self, label: str) -> None:
        self._current = label
        self._by_label.setdefault(label, {})

    def add(self, what: str, seconds: float) -> None:
        if self._current is None:
            self.start("(unlabelled)")
        assert self._current is not None
        spent = self._by_label[self._current]
        spent[what] = spent.get(what, 0.0) + seconds

    @property
    def trials(self) -> Mapping[str, Mapping[str, float]]:
        return self._by_label

    def seconds(self, label: str | None = None, *, what: str | None = None) -> float:
        """Modelled seconds of one label (or all), of one activity (or all)."""
        labels = [label] if label is not None else list(self._by_label)
        return sum(s for lab in labels for w, s in self._by_label.get(lab, {}).items() if what is None or w == what)


# -- the service -------------------------------------------------------------------------------------------------


class ModelService(BaseService):
    """A server "process" that lives in the model: restarts are instant, but they fail like the real one.

    Startup failures mirror ``python -m tuner.sim``, with the same log lines: an invalid command line exits 2
    with argparse's message; what SGLang rejects after parsing (a window below the block size, DDTREE on
    mainline, ...) dies at once with a ``ValueError`` traceback; an empty KV pool dies after the weights load
    (``RuntimeError: Not enough memory``) and verify CUDA graphs that do not fit die during capture (``Capture
    cuda graph failed: CUDA out of memory`` and SGLang's hint). Readiness reads that log exactly as it reads a
    real one (:func:`model_readiness` uses :class:`tuner.target.readiness.LogWatch` and the study's fatal patterns).

    ``cold_start`` (default 0: the model's server is warm once ready) slows the first pass at each batch size a
    process runs by that fraction, as kernels compiled or tuned on first use would; the start-up request
    warms batch size 1. It is how tests check that ``warmup = "auto"`` notices a server that needs warm-ups.
    """

    def __init__(
        self,
        *,
        base: LaunchSpec,
        clock: VirtualClock | None = None,
        load_time_s: float = REAL_LOAD_TIME_S,
        cold_start: float = 0.0,
    ):
        if not 0.0 <= cold_start < 1.0:
            raise ValueError(f"cold_start must be within [0, 1), got {cold_start}")
        self._base = base
        self._cold_start = cold_start
        self._warm_shapes: set[int] = set()
        self._staged = base
        self.clock = clock or VirtualClock()
        self._load_time = load_time_s
        self._log = ""
        self._starts = 0
        self._identity: ProcessIdentity | None = None
        self._alive = False
        self._exit_status: int | None = None
        self._spec: LaunchSpec | None = None
        self._cfg: ServerConfig | None = None
        self.startup_s = 0.0
        self.phase_times: dict[str, float] = {}

    # -- what the model parts read

    @property
    def server_config(self) -> ServerConfig | None:
        """The model config of the live process, or None when nothing serves."""
        return self._cfg if self._alive else None

    def first_pass(self, running: int) -> float:
        """The speed factor of a pass that runs ``running`` requests at once: ``1 - cold_start`` the first time
        this process runs that batch size (kernels compiled on first use), 1.0 after."""
        if running in self._warm_shapes:
            return 1.0
        self._warm_shapes.add(running)
        return 1.0 - self._cold_start

    def log_lines(self, lines: Sequence[str]) -> None:
        """Lines the running server logs (the scheduler's retractions)."""
        if lines:
            self._write("\n".join(lines))

    def die(self, log_text: str) -> None:
        """The process crashes (e.g. a CUDA OOM under load): it is gone and its last words are in the log."""
        self._write(log_text)
        self._alive = False
        self._exit_status = 1

    # -- BaseService

    def apply(self, spec: LaunchSpec) -> None:
        self._staged = spec

    def restart(self, *, label: str = "run") -> Restarted:
        old = self._identity if self._alive else None
        if old is not None:
            self._stop_current()
        self._starts += 1
        self._identity = ProcessIdentity(pid=100000 + self._starts, started=f"model-start-{self._starts}")
        cursor = str(len(self._log))
        self.clock.start(label)
        self._boot(self._staged)
        self.clock.add("startup", self.startup_s)
        return Restarted(old=old, new=self._identity, log_cursor=cursor)

    def state(self) -> ServiceState:
        return ServiceState(running=self._alive, identity=self._identity, exit_status=self._exit_status)

    def is_alive(self, identity: ProcessIdentity) -> bool:
        return self._alive and identity == self._identity

    def read_log(self, cursor: str) -> LogChunk:
        start = min(int(cursor or 0), len(self._log))
        return LogChunk(text=self._log[start:], cursor=str(len(self._log)))

    def running_spec(self) -> LaunchSpec | None:
        return self._spec if self._alive else None

    def preflight(self) -> Preflight:
        program = program_part(self._base.argv)
        text = f"in-process model of `{shlex.join(program)}`: nothing to reach"
        return Preflight(findings=(Finding(ok=True, text=text),), program=program)

    def stop(self) -> None:
        if self._alive:
            self._stop_current()

    def revert(self) -> None:
        self._staged = self._base

    # -- internals

    def _write(self, text: str) -> None:
        self._log += text if text.endswith("\n") else text + "\n"

    def _stop_current(self) -> None:
        self._write("Received sigterm. Shutting down gracefully.\nServer exited.")
        self._alive = False
        self._exit_status = 0

    def _boot(self, spec: LaunchSpec) -> None:
        self._spec, self._cfg, self.phase_times = spec, None, {}
        self._warm_shapes = {1}  # the server's own start-up request (and readiness's) ran one request alone
        try:
            cfg, version, warnings = parse_launch(spec)
        except ServerArgsError as exc:  # SGLang's checks after parsing: a traceback before anything loads
            self._fail(_traceback("resolve_once", f"ValueError: {exc}"), status=1, seconds=5.0)
            return
        except ValueError as exc:  # the parser's "error: unrecognized arguments: ..." (exit status 2)
            self._fail(str(exc), status=2, seconds=5.0)
            return
        self._cfg = cfg
        load = self._load_time
        capture = capture_seconds(cfg, load_time=load)
        self._write("\n".join([*warnings, *load_begin_lines(version), *load_end_lines(cfg, load_time=load)]))
        self.phase_times = {"loading weights": 0.0, "capturing cuda graphs": round(load, 3)}
        failure = capture_failure_text(cfg, version)
        if failure is not None and failure.startswith("RuntimeError"):  # the KV pool, sized before any capture
            self._fail(
                "[TP0] Scheduler hit an exception: " + _traceback("init_memory_pool", failure), status=1, seconds=load
            )
            return
        self._write("\n".join(capture_begin_lines(cfg, version)))
        if failure is not None:  # capture runs out of memory part-way, at the largest batch sizes
            self._fail(
                "[TP0] Scheduler hit an exception: " + _traceback("capture", failure),
                status=1,
                seconds=load + capture * 0.5,
            )
            return
        total = startup_seconds(cfg, load_time=load)
        self._write("\n".join([*capture_end_lines(cfg, version, seconds=capture), READY_LINE]))
        self.phase_times.update({"warming up": round(load + capture, 3), "serving": round(total, 3)})
        self._alive, self._exit_status, self.startup_s = True, None, total

    def _fail(self, text: str, *, status: int, seconds: float) -> None:
        self._write(text)
        self._alive, self._exit_status, self.startup_s = False, status, seconds


def _traceback(function: str, failure: str) -> str:
    """The traceback the simulator prints for ``failure`` (an ``Exception: message`` line and what follows)."""
    return (
        f'Traceback (most recent call last):\n  File "sglang/srt/model_executor.py", line 1, in {function}\n{failure}'
    )


def model_readiness(
    *,
    service: BaseService,
    restarted: Restarted,
    endpoint: Endpoint,
    config: ReadinessSection,
    progress: Progress | None = None,
) -> Ready:
    """Readiness for a :class:`ModelService`: the log decides, exactly as :func:`tuner.target.readiness.wait_ready`.

    A dead process fails with the fatal log line (``AssertionError``, ``torch.OutOfMemoryError: CUDA out of
    memory``, ``unrecognized arguments``) as the reason; a live one is ready after its modelled startup time.
    """
    if not isinstance(service, ModelService):
        raise TypeError(f"model_readiness needs a ModelService, got {type(service).__name__}")
    watch = LogWatch(
        service=service,
        cursor=restarted.log_cursor,
        fatal_patterns=config.fatal_patterns,
        phase_markers=config.phase_markers,
    )
    watch.poll(elapsed=service.startup_s)
    watch.flush(elapsed=service.startup_s)
    if watch.fatal_lines:
        raise StartFailed(
            f"server logged a fatal error while {watch.phase}: {watch.headline()}", evidence=watch.evidence()
        )
    if not service.is_alive(restarted.new):
        status = service.state().exit_status
        raise StartFailed(f"server process exited with status {status} while {watch.phase}", evidence=watch.evidence())
    if progress:
        progress(f"ready after {service.startup_s:.1f} s (modelled)")
    return Ready(
        seconds=round(service.startup_s, 3),
        phase_times=dict(service.phase_times),
        log_cursor=watch.cursor,
        endpoint=endpoint,
    )


# -- benchmark and gate ------------------------------------------------------------------------------------------


class ModelBenchmark(BaseBenchmark):
    """Scenario results from the model's noise-free figures times seeded multiplicative noise per repeat.

    ``noise`` is the standard deviation of log throughput per repeat (0.02: ~2%). A scenario whose requests
    outgrow the KV pool runs slower (the scheduler's retractions go to the service's log); one whose requests
    are refused or aborted raises DiedUnderLoad, and so does a server that crashes under the load
    (``--sim-crash-above-batch-tokens``), which then is gone. ``seconds`` in the result is modelled time
    (warm-up + repeats), not wall time.
    """

    def __init__(
        self,
        *,
        service: ModelService,
        config: BenchmarkSection,
        noise: float = 0.02,
        rng: random.Random | None = None,
        variant: Variant | None = None,
    ) -> None:
        if noise < 0:
            raise ValueError(f"noise must be >= 0, got {noise}")
        self._variant = variant
        self._service = service
        self._config = config
        self._noise = noise
        self._rng = rng or random.Random(0)
        self.policy = SequentialPolicy.from_section(config)
        self.warmup_policy = WarmupPolicy.from_section(config)

    def run_scenario(self, scenario: Scenario) -> ScenarioResult:
        cfg = self._service.server_config
        if cfg is None:
            raise DiedUnderLoad(f"no server answers for scenario {scenario.name}", evidence="the process is gone")
        m = self._modelled(cfg, scenario)
        self._service.log_lines(m.retractions)
        if m.died is not None:
            raise self._died(scenario, m)
        cfg_b = self._config
        shape = min(scenario.concurrency, cfg.max_running_requests)
        plan = self.warmup_plan(scenario)
        seconds, first_pass, warmed = 0.0, None, 0
        if plan.kind == "requests":
            warmed = cfg_b.warmup_requests
            # A warm-up is timed like the requests it sends: alone, one request takes about as long as a wave.
            warm = dataclasses.replace(scenario, concurrency=min(scenario.concurrency, warmed), requests=warmed)
            seconds += model_scenario(cfg, warm, seed=cfg_b.seed).seconds / self._service.first_pass(min(shape, warmed))
        elif plan.kind == "probe":
            warmed = scenario.requests
            f = self._factor() * self._service.first_pass(shape)
            first_pass, seconds = m.tok_s * f, seconds + m.seconds / f
        warmup_s = seconds
        passes, factors, decision = self._repeats(cfg, scenario, m, shape)
        tok_s = [p.tok_s * f for p, f in zip(passes, factors, strict=True)]
        per_stream = [p.per_stream_tok_s * f for p, f in zip(passes, factors, strict=True)]
        seconds += sum(p.seconds / f for p, f in zip(passes, factors, strict=True))
        # Open loop: a faster run shortens every request's times; the rates are the schedule's and the queue's.
        speed = math.exp(statistics.fmean(math.log(f) for f in factors))
        latency = {
            k: v / speed if k.endswith("_s") and isinstance(v, float) else v
            for k, v in self._latency(scenario, passes).items()
        }
        # The SLO is judged on the noise-free requests (noise moves every request alike, not one by one).
        self._service.clock.add("benchmark", seconds)
        return ScenarioResult.from_repeats(
            scenario=scenario,
            repeats_tok_s=tok_s,
            repeats_per_stream_tok_s=per_stream,
            confidence=cfg_b.confidence,
            noise=self.noise(scenario),
            accept_length=m.accept_length,
            requests=scenario.requests * len(factors),
            seconds=round(seconds, 3),
            accept_method="model",
            output_tokens=scenario.requests * scenario.output_tokens * len(factors),
            warmup_requests=warmed,
            warmup=plan.kind,
            first_pass_tok_s=first_pass,
            warmup_s=round(warmup_s, 3),
            **latency,
        ).stopped_by(decision)

    def _repeats(
        self, cfg: ServerConfig, scenario: Scenario, first: ModelledScenario, shape: int
    ) -> tuple[list[ModelledScenario], list[float], RepeatDecision]:
        """The same sequential policy as the HTTP benchmark: one repeat at a time, each with its own arrivals (the
        draw's seed plus the repeat, as the HTTP benchmark draws them), until it says stop and an SLO is decided;
        each repeat's modelled pass and speed factor."""
        factors: list[float] = []
        passes: list[ModelledScenario] = []
        while True:
            passes.append(first if not passes else self._modelled(cfg, scenario, repeat=len(passes)))
            if passes[-1].died is not None:
                raise self._died(scenario, passes[-1])
            factors.append(self._factor() * self._service.first_pass(shape))
            decision = self.next_repeat(scenario, [p.tok_s * f for p, f in zip(passes, factors, strict=True)])
            if decision.stop and not self.slo_pending(scenario, self._latency(scenario, passes), len(passes)):
                return passes, factors, decision

    def extend_scenario(self, scenario: Scenario, result: ScenarioResult) -> ScenarioResult:
        cfg = self._service.server_config
        if cfg is None:
            raise DiedUnderLoad(f"no server answers for scenario {scenario.name}", evidence="the process is gone")
        m = self._modelled(cfg, scenario)
        f = self._factor() * self._service.first_pass(min(scenario.concurrency, cfg.max_running_requests))
        seconds = m.seconds / f
        self._service.clock.add("benchmark", seconds)
        kept = {
            k: getattr(result, k)
            for k in ("accept_length", "accept_method", "warmup_requests", "warmup", "first_pass_tok_s", "warmup_s",
                      *m.latency)
        }  # fmt: skip
        return ScenarioResult.from_repeats(
            scenario=scenario,
            repeats_tok_s=(*result.repeats_tok_s, m.tok_s * f),
            repeats_per_stream_tok_s=(*result.repeats_per_stream_tok_s, m.per_stream_tok_s * f),
            confidence=self._config.confidence,
            noise=self.noise(scenario),
            requests=result.requests + scenario.requests,
            seconds=round(result.seconds + seconds, 3),
            output_tokens=result.output_tokens + scenario.requests * scenario.output_tokens,
            stopped=result.stopped,
            **kept,
        )

    def _modelled(self, cfg: ServerConfig, scenario: Scenario, *, repeat: int = 0) -> ModelledScenario:
        seed = self.draw_seed(self._config.seed) + repeat
        m = model_scenario(cfg, scenario, seed=seed, confidence=self._config.confidence)
        return self._variant(cfg, scenario, m) if self._variant else m

    def _latency(self, scenario: Scenario, passes: Sequence[ModelledScenario]) -> Mapping[str, Any]:
        """The latency figures and SLO verdict over every pass's requests, as the HTTP benchmark pools them."""
        if not passes[0].records:
            return passes[0].latency
        runs = [LoadResult(records=list(p.records), started=len(p.records)) for p in passes]
        return latency_figures(runs, slo=scenario.slo, confidence=self._config.confidence, looks=self.slo_looks)

    def _died(self, scenario: Scenario, m: ModelledScenario) -> DiedUnderLoad:
        """What the HTTP benchmark reports when the scenario's requests fail (and the crash, when there is one)."""
        reason = (
            f"died under load in scenario {scenario.name}: {scenario.concurrency}/{scenario.requests} requests failed"
        )
        if m.crashed:
            self._service.die(
                "[TP0] Scheduler hit an exception: "
                + _traceback(
                    "forward_batch_speculative",
                    f"RuntimeError: CUDA error: an illegal memory access was encountered ({m.died})",
                )
                + "\nReceived sigquit from a child process. It usually means the child failed."
            )
            return DiedUnderLoad(
                f"{reason} (server disconnected); the server no longer answers /health", evidence=m.died or ""
            )
        return DiedUnderLoad(f"{reason} (HTTP error)", evidence=f"{m.died or ''}\n/health after the failures: 200")

    def _factor(self) -> float:
        return math.exp(self._rng.gauss(0.0, self._noise)) if self._noise else 1.0


class ModelGate(BaseGate):
    """The correctness gate against the model: every answer is right unless the config corrupts code.

    On the "buggy kernel path" (:func:`tuner.sim.corrupts_code`) each answer passes with probability
    ``corrupt_pass_rate`` (default 0: all wrong), drawn from ``rng``.
    """

    def __init__(
        self,
        *,
        service: ModelService,
        section: GateSection,
        corrupt_pass_rate: float = 0.0,
        rng: random.Random | None = None,
    ) -> None:
        if not 0.0 <= corrupt_pass_rate <= 1.0:
            raise ValueError(f"corrupt_pass_rate must be within [0, 1], got {corrupt_pass_rate}")
        self._service = service
        self._section = section
        self._pass_rate = corrupt_pass_rate
        self._rng = rng or random.Random(0)

    def run(self) -> GateResult:
        cfg = self._service.server_config
        tasks = list(self._section.tasks)
        if self._section.count is not None:
            tasks = [f"problem-{i}" for i in range(self._section.count)]
        outcomes = [self._judge(task, cfg) for task in tasks]
        seconds = 0.0
        if cfg is not None:
            answers = Scenario(
                name="gate",
                concurrency=min(self._section.concurrency, len(tasks)),
                prompt_tokens=GATE_PROMPT_TOKENS,
                output_tokens=GATE_ANSWER_TOKENS,
                requests=len(tasks),
            )
            seconds = model_scenario(cfg, answers).seconds
        self._service.clock.add("gate", seconds)
        return GateResult(
            passed=sum(o.passed for o in outcomes), total=len(outcomes), outcomes=tuple(outcomes), seconds=seconds
        )

    def _judge(self, task: str, cfg: ServerConfig | None) -> ProblemOutcome:
        if cfg is None:  # as HumanEvalGate words a server that does not answer
            return ProblemOutcome(task_id=task, passed=False, reason="request failed: no server answers")
        if not corrupts_code(cfg) or self._rng.random() < self._pass_rate:
            return ProblemOutcome(task_id=task, passed=True)
        return ProblemOutcome(
            task_id=task, passed=False, reason="AssertionError: wrong answer (the config corrupts generated code)"
        )


def model_target(config: StudyConfig, service: ModelService) -> Target:
    """The study's target with the model as its server: no host, no lock, readiness read from the model's log."""
    target = open_target(config, service=service, readiness=model_readiness, lock=False)
    target.endpoint = dataclasses.replace(target.endpoint, model=config.target.model or "model")
    return target


def model_parts(
    config: StudyConfig,
    target: Target,
    *,
    noise: float = 0.02,
    seed: int = 0,
    corrupt_pass_rate: float = 0.0,
    variant: Variant | None = None,
) -> TrialParts:
    """TrialParts for a :func:`model_target`; ``functools.partial`` it into run_study's ``parts_factory``.

    ``variant``: the benchmark measures another server's figures (:class:`tuner.sim.inprocess.ModelVariant`)."""
    service = target.service
    if not isinstance(service, ModelService):
        raise TypeError(f"model_parts needs a ModelService, got {type(service).__name__}")
    bench_rng, gate_rng = random.Random(seed), random.Random(seed + 1)
    gate = config.gate if config.gate and config.gate.enabled else None
    return TrialParts(
        target=target,
        benchmark=lambda endpoint: ModelBenchmark(
            service=service, config=config.benchmark, noise=noise, rng=bench_rng, variant=variant
        ),
        gate=(
            (
                lambda endpoint: ModelGate(
                    service=service, section=gate, corrupt_pass_rate=corrupt_pass_rate, rng=gate_rng
                )
            )
            if gate
            else None
        ),
        gate_policy=(lambda result: check_gate(result, gate)) if gate else None,
    )


@dataclass(frozen=True, kw_only=True)
class InProcessRun:
    study_name: str
    storage: str
    clock: VirtualClock
    counted: int


def run_inprocess(
    config: StudyConfig,
    *,
    storage: str,
    trials: int | None = None,
    study_name: str | None = None,
    noise: float = 0.02,
    seed: int = 0,
    load_time_s: float = REAL_LOAD_TIME_S,
    artifacts_dir: Path | None = None,
    console: Console | None = None,
    cold_start: float = 0.0,
    variant: Variant | None = None,
) -> InProcessRun:
    """Run a whole study through :func:`tuner.study.run_study` against the model.

    ``storage`` is required so a model run never lands in the real study's database. ``cold_start``: see
    :class:`ModelService`; ``variant``: see :func:`model_parts`.
    Evidence files go to ``artifacts_dir`` (default: a temporary directory removed afterwards). ``on_exit`` is
    forced to "stop": there is no real server to leave in any state.
    """
    with tempfile.TemporaryDirectory(prefix="tune-model-") as tmp:
        study_section = dataclasses.replace(
            config.study, on_exit="stop", artifacts_dir=artifacts_dir or Path(tmp) / "artifacts"
        )
        config = dataclasses.replace(config, study=study_section)
        service = ModelService(base=base_spec(config.target), load_time_s=load_time_s, cold_start=cold_start)
        summary = run_study(
            config,
            trials=trials,
            storage=storage,
            study_name=study_name,
            target=model_target(config, service),
            parts_factory=functools.partial(model_parts, noise=noise, seed=seed, variant=variant),
            console=console or Console(stream=_Null(), live=False),
        )
    return InProcessRun(study_name=summary.study_name, storage=storage, clock=service.clock, counted=summary.counted)


class _Null:
    """A stream that swallows the loop's progress lines."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False
