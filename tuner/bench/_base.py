from __future__ import annotations

import abc
import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tuner.bench._slo import goodput_fields
from tuner.bench._warmup import WarmupLookup, WarmupPlan, WarmupPolicy
from tuner.config import Scenario
from tuner.slo import UNDECIDED, SloVerdict
from tuner.stats import Noise, Reference, ReferenceLookup, RepeatDecision, SequentialPolicy, estimate


@dataclass(frozen=True, kw_only=True)
class ScenarioResult:
    """One scenario's measurements over its repeats.

    ``output_tok_s`` is the median over repeats of aggregate output tokens/s; ``score`` is the figure the
    objective uses: the lower end of a t interval on log throughput (:func:`tuner.stats.estimate`), with
    ``point`` (geometric mean of the repeats) and ``half_width`` (tok/s) beside it.
    """

    name: str
    concurrency: int | None
    """Requests in flight the load was held to: a closed loop's streams, an open loop's ``max_concurrency`` (None:
    no cap: an open loop's requests arrive on their schedule, whatever is in flight; its load is :attr:`rate`)."""
    repeats_tok_s: tuple[float, ...]
    output_tok_s: float
    score: float
    per_stream_tok_s: float
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    """TTFT percentiles over every counted request; open loop: from its scheduled arrival (tuner.bench._latency)."""
    itl_p50_s: float | None = None
    itl_p99_s: float | None = None
    accept_length: float | None = None
    """Mean speculative acceptance length during the scenario, or None when the server does not expose it."""
    ci_low: float | None = None
    ci_high: float | None = None
    requests: int = 0
    errors: int = 0
    seconds: float = 0.0
    # --- added by the HTTP benchmark; defaults keep other implementations valid ---
    repeats_per_stream_tok_s: tuple[float, ...] = ()
    """Per repeat: mean over requests of decode tok/s (tokens after the first event / first-to-last event)."""
    per_stream_score: float | None = None
    """median - k * 1.4826 * MAD of ``repeats_per_stream_tok_s`` (for ``metric = "per_stream_tok_s"``)."""
    accept_method: str | None = None
    """How ``accept_length`` was obtained: ``counters``, ``derived``, ``gauge`` (see tuner.bench._server)."""
    e2e_p50_s: float | None = None
    e2e_p99_s: float | None = None
    """End-to-end latency percentiles (the ``e2e_*`` metrics), from the same origin as TTFT."""
    ttft_p90_s: float | None = None
    e2e_p90_s: float | None = None
    tpot_p50_s: float | None = None
    tpot_p90_s: float | None = None
    tpot_p99_s: float | None = None
    """Time per output token after the first, per request, ``(e2e - TTFT) / (tokens - 1)``: percentiles."""
    ttft_p50_low_s: float | None = None
    ttft_p50_high_s: float | None = None
    ttft_p99_low_s: float | None = None
    ttft_p99_high_s: float | None = None
    tpot_p50_low_s: float | None = None
    tpot_p50_high_s: float | None = None
    tpot_p99_low_s: float | None = None
    tpot_p99_high_s: float | None = None
    e2e_p50_low_s: float | None = None
    e2e_p50_high_s: float | None = None
    e2e_p99_low_s: float | None = None
    e2e_p99_high_s: float | None = None
    """The p50 and p99 intervals at the benchmark's confidence (:func:`tuner.stats.percentile_interval`): two of
    the pooled requests by rank; None on a side where too few requests allow a bound (p99 of 80: no upper one)."""
    rate: float | None = None
    """Open loop: the rate (requests/s) the scenario was run at, as set (None for a closed loop)."""
    offered_rps: float | None = None
    """Open loop: the requests/s the arrival schedule offered (median over repeats; None for a closed loop)."""
    achieved_rps: float | None = None
    """Completions/s the server delivered (median over repeats): below capacity equal to the offered rate."""
    sent_rps: float | None = None
    """Sends/s (median over repeats): equal to the offered rate while the client holds its schedule."""
    attainment: float | None = None
    """With an SLO: the share of counted requests that met every limit (tuner.bench._slo)."""
    attainment_low: float | None = None
    attainment_high: float | None = None
    """The attainment's Clopper-Pearson interval at the benchmark's confidence."""
    slo_verdict: str | None = None
    """With an SLO: ``met``, ``missed`` or ``undecided`` (:class:`tuner.slo.SloVerdict`, made by
    :mod:`tuner.bench._slo`); read whole as :attr:`verdict`."""
    slo_required: float | None = None
    slo_margin: float | None = None
    slo_margin_low: float | None = None
    slo_margin_high: float | None = None
    """The share required and the margin with its interval (:class:`tuner.slo.SloVerdict`)."""
    slo_requests: int | None = None
    """The requests the verdict judged: the steady ones (:mod:`tuner.bench._steady`; None: recorded before)."""
    slo_too_short: bool | None = None
    """A pass ended before its queue filled: the verdict can be missed, never met."""
    fill_requests: int = 0
    """Open loop: requests left out of the percentiles and the verdict as each pass's queue filled."""
    good_token_share: float | None = None
    """With an SLO: the share of output tokens in requests that met it."""
    goodput_rps: float | None = None
    """Requests/s that met the SLO (tuner.bench._slo.goodput_fields), and its lower bound below."""
    goodput_rps_low: float | None = None
    goodput_tok_s: float | None = None
    """Output tokens/s of the requests that met the SLO, and its lower bound below."""
    goodput_tok_s_low: float | None = None
    output_tokens: int = 0
    """Output tokens of the measured requests (all repeats; warm-up excluded)."""
    tokens_from_usage: bool = True
    """False when some request's token count was estimated: no ``usage`` and no tokenizer endpoint to count it."""
    short_requests: int = 0
    """Measured requests that returned fewer tokens than asked for (server ignored ``ignore_eos``)."""
    prompt_tokens: float | None = None
    """Mean prompt tokens the server reported (checks the prompt builder against the server's tokenizer)."""
    warmup_requests: int = 0
    """Requests sent before the counted repeats: the warm-up's, or a probe pass's (``warmup``)."""
    warmup: str | None = None
    """What ran before the counted repeats (:data:`tuner.bench.WARMUP_KINDS`): ``requests``, ``probe``, ``none``."""
    first_pass_tok_s: float | None = None
    """A probe's aggregate tok/s: the first pass after the start, measured but never counted as a repeat."""
    warmup_s: float | None = None
    """Seconds the warm-up or probe took (part of ``seconds``)."""
    cache_flushed: bool | None = None
    """Whether ``/flush_cache`` succeeded before each repeat (None: not asked; False: server lacks it)."""
    client_bound: bool = False
    """The load generator, not the server, set the pace (see tuner.bench._alarm): the figures understate the
    server. Never set by a benchmark that does not measure its client."""
    client_bound_by: str | None = None
    """Why: ``cpu`` (a client process over its CPU budget), ``start delay`` (requests went out late), ``stall``
    (its event loop could not run, and read events late), joined when several."""
    client_cpu_cores: float | None = None
    """CPU of all load-generator processes over the measured repeats, in cores."""
    client_busiest_process_cores: float | None = None
    start_delay_p99_s: float | None = None
    """p99 of the time from when a request was due to when it was sent."""
    client_stall_s: float | None = None
    """The longest time a load-generator process's event loop could not run in a measured pass."""
    client_processes: int | None = None
    client_reruns: int = 0
    """Passes measured and not counted because the load generator was the bottleneck (each was run again)."""

    def client_warning(self) -> str | None:
        """A one-line warning naming the cause and the fix when the scenario was client-bound, else None."""
        if not self.client_bound:
            return None
        n = self.client_processes or 1
        cpu = f"{self.client_busiest_process_cores or 0.0:.2f} core in the busiest of {n} process(es)"
        delay = f"request start delay p99 {(self.start_delay_p99_s or 0.0) * 1000:.0f} ms"
        fix = f"set [benchmark] client_processes = {n + 1} (or more, up to the client's cores)"
        if "cpu" in (self.client_bound_by or "cpu"):
            return (
                f"WARNING {self.name}: the load generator was the bottleneck ({cpu}, {delay}); its figures "
                f"understate the server: {fix}, or run the client on a machine with more cores."
            )
        if "start delay" not in (self.client_bound_by or ""):
            return (
                f"WARNING {self.name}: the load generator's event loop stalled for "
                f"{(self.client_stall_s or 0.0) * 1000:.0f} ms though it used only {cpu}: other work on the client "
                f"machine took its CPU, and every event it read meanwhile was stamped late; measure from a quieter "
                f"client machine, or {fix}."
            )
        return (
            f"WARNING {self.name}: requests went out late ({delay}) though the load generator used only {cpu}: "
            f"other work on the client machine competes for its CPU, or the start burst is large; the figures "
            f"understate the server: {fix}, or measure from a quieter client machine."
        )
    point: float | None = None
    """Geometric mean of ``repeats_tok_s``: the point estimate the score is a lower bound of."""
    half_width: float | None = None
    """Half the width of the score's interval in tok/s (None: one repeat, no noise estimate)."""
    stopped: str | None = None
    """Why the repeats stopped (:data:`tuner.bench.VERDICTS`): precise, worse, behind, better or max_repeats."""

    @classmethod
    def from_repeats(
        cls,
        *,
        scenario: Scenario,
        repeats_tok_s: Sequence[float],
        repeats_per_stream_tok_s: Sequence[float],
        confidence: float,
        noise: Noise | None = None,
        **measured: Any,
    ) -> ScenarioResult:
        """Summarise per-repeat figures the one way every benchmark must (medians, score bound, interval).

        ``noise`` is the study's pooled repeat noise (:meth:`BaseBenchmark.noise`), so a scenario measured
        once still gets an interval and a score below its point, like one measured several times.
        """
        est = estimate(repeats_tok_s, confidence, noise)
        per_stream = tuple(repeats_per_stream_tok_s)
        tokens, requests = measured.get("output_tokens"), measured.get("requests")
        per_request = tokens / requests if tokens and requests else scenario.output_tokens or None
        goodput = goodput_fields(point=est.point, score=est.score, figures=measured, tokens_per_request=per_request)
        return cls(
            name=scenario.name,
            concurrency=scenario.max_concurrency if scenario.open_loop else scenario.concurrency,
            rate=scenario.rate,
            repeats_tok_s=tuple(repeats_tok_s),
            output_tok_s=statistics.median(repeats_tok_s),
            score=est.score,
            point=est.point,
            half_width=est.half_width,
            per_stream_tok_s=statistics.median(per_stream) if per_stream else 0.0,
            ci_low=est.low if est.half_width is not None else None,
            ci_high=est.high if est.half_width is not None else None,
            repeats_per_stream_tok_s=per_stream,
            per_stream_score=estimate(per_stream, confidence, noise).score if per_stream else None,
            **{**goodput, **measured},
        )

    @property
    def verdict(self) -> SloVerdict | None:
        """The scenario's SLO verdict as the benchmark made it (None: no SLO, or no request judged)."""
        if self.slo_verdict is None:
            return None
        return SloVerdict.read(lambda name: getattr(self, name), requests=self.requests)

    def stopped_by(self, decision: RepeatDecision | None) -> ScenarioResult:
        """This result, recording why its repeats stopped."""
        return self if decision is None else dataclasses.replace(self, stopped=decision.verdict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class BaseBenchmark(abc.ABC):
    """How a server is benchmarked: the benchmark seam (HTTP load generator, or the in-process model).

    Implementations raise :class:`~tuner.errors.DiedUnderLoad` when requests fail or the server dies: a
    config that cannot survive its own benchmark is a failed config, never a low score.
    """

    policy: SequentialPolicy = SequentialPolicy()
    """When to stop repeating a scenario; implementations set it from their ``[benchmark]`` section."""
    warmup_policy: WarmupPolicy = WarmupPolicy()
    """Whether a scenario gets a warm-up; implementations set it from their ``[benchmark]`` section."""
    draw: int = 0
    """Which independent draw of arrivals and prompts this benchmark sends: 0 for a trial (the same for every
    trial: common random numbers), the round for a confirmation's visits (fresh draws, the same for every config
    of a round). :meth:`draw_seed` turns the study's benchmark seed into this draw's."""
    _reference: ReferenceLookup | None = None
    _on_objective: bool = False
    _first_passes: WarmupLookup | None = None

    @abc.abstractmethod
    def run_scenario(self, scenario: Scenario) -> ScenarioResult:
        """Warm up as :meth:`warmup_plan` says, run the repeats until :meth:`next_repeat` says stop, summarise."""

    @abc.abstractmethod
    def extend_scenario(self, scenario: Scenario, result: ScenarioResult) -> ScenarioResult:
        """One more counted repeat of a scenario this benchmark measured (``result``), no warm-up: the server
        has served the scenario's shape since its start. The result summarises every repeat."""

    def use_reference(self, reference: ReferenceLookup | None, *, on_objective: bool = False) -> None:
        """The reference trial's repeats per scenario (from the regression pruner), for worse/better stops.

        ``on_objective``: repeats beyond ``min_repeats`` are decided on the whole objective
        (:func:`tuner.stats.decide_objective`, by the caller), not per scenario.
        """
        self._reference = reference
        self._on_objective = on_objective

    def draw_seed(self, seed: int) -> int:
        """``seed`` (the ``[benchmark] seed``) as :attr:`draw` takes it: far apart from any repeat's offset."""
        return seed + 100_003 * self.draw

    def use_first_passes(self, lookup: WarmupLookup | None) -> None:
        """The study's evidence about each scenario's first pass after a start (for ``warmup = "auto"``)."""
        self._first_passes = lookup

    def warmup_plan(self, scenario: Scenario) -> WarmupPlan:
        """What runs before ``scenario``'s counted repeats: a warm-up, a probe pass, or nothing."""
        return self.warmup_policy.plan(self._first_passes(scenario.name) if self._first_passes else None)

    def next_repeat(self, scenario: Scenario, samples: Sequence[float]) -> RepeatDecision:
        """Whether to run another repeat of ``scenario`` after ``samples`` (aggregate tok/s per repeat)."""
        return self.policy.decide(samples, self._reference_of(scenario), objective=self._on_objective)

    @property
    def slo_looks(self) -> int:
        """The passes a sequential SLO verdict may stop after (:meth:`slo_pending`), each look paid for in its
        interval (:func:`tuner.bench._slo.looked`); fixed repeats look once, at the end."""
        return 1 if self.policy.fixed else self.policy.max_repeats

    def slo_pending(self, scenario: Scenario, figures: Mapping[str, Any], passes: int) -> bool:
        """Whether ``scenario``'s SLO verdict after ``passes`` counted passes (``figures``: their
        :func:`~tuner.bench.latency_figures`) needs another pass: undecided, and fewer than ``max_repeats`` passes
        spent (the request budget: ``max_repeats`` times the scenario's requests). A clear verdict costs one pass,
        a borderline one more, each with fresh arrivals (a replicate)."""
        return (
            scenario.slo is not None
            and figures.get("slo_verdict") == UNDECIDED
            and passes < self.policy.max_repeats
        )

    def noise(self, scenario: Scenario) -> Noise | None:
        """The study's pooled repeat noise for ``scenario``, for the candidate's own interval (None: no study, or
        no config measured twice yet): :attr:`Reference.study_noise`."""
        reference = self._reference_of(scenario)
        return reference.study_noise if reference is not None else None

    def _reference_of(self, scenario: Scenario) -> Reference | None:
        return self._reference(scenario.name) if self._reference else None

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release clients and connections."""
