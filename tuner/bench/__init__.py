"""How a server is benchmarked: the benchmark seam, the HTTP load generator and its statistics."""

from tuner.bench._alarm import ClientLoad, client_load
from tuner.bench._base import BaseBenchmark, ScenarioResult
from tuner.bench._http import HttpBenchmark, RepeatCallback
from tuner.bench._load import LoadResult, LoadTarget, make_client, run_load
from tuner.bench._prompts import build_prompt
from tuner.bench._request import RequestRecord, RequestSpec, build_body, stream_request
from tuner.bench._sequential import (
    VERDICTS,
    ObjectiveDecision,
    Reference,
    ReferenceLookup,
    RepeatDecision,
    SequentialPolicy,
    decide_objective,
    objective_slower,
)
from tuner.bench._server import ServerProbe, ServerSnapshot, acceptance_between, parse_prometheus, prometheus_series
from tuner.bench._sse import SSEDecoder
from tuner.bench._stats import (
    EMPTY_POOL,
    MAD_TO_SIGMA,
    Estimate,
    Noise,
    bootstrap_ci,
    estimate,
    import_statistics,
    is_slower,
    mad,
    percentile,
    pooled_noise,
    robust_score,
)
from tuner.bench._warmup import (
    WARMUP_KINDS,
    FirstPasses,
    Slowdown,
    WarmupLookup,
    WarmupPlan,
    WarmupPolicy,
    first_pass_slowdown,
)
from tuner.bench._workers import InProcessRunner, LoadRunner, ProcessRunner, choose_processes

__all__ = [
    "EMPTY_POOL",
    "MAD_TO_SIGMA",
    "VERDICTS",
    "WARMUP_KINDS",
    "BaseBenchmark",
    "ClientLoad",
    "Estimate",
    "FirstPasses",
    "HttpBenchmark",
    "InProcessRunner",
    "LoadResult",
    "LoadRunner",
    "LoadTarget",
    "Noise",
    "ObjectiveDecision",
    "ProcessRunner",
    "Reference",
    "ReferenceLookup",
    "RepeatCallback",
    "RepeatDecision",
    "RequestRecord",
    "RequestSpec",
    "SSEDecoder",
    "ScenarioResult",
    "SequentialPolicy",
    "ServerProbe",
    "ServerSnapshot",
    "Slowdown",
    "WarmupLookup",
    "WarmupPlan",
    "WarmupPolicy",
    "acceptance_between",
    "bootstrap_ci",
    "build_body",
    "build_prompt",
    "choose_processes",
    "client_load",
    "decide_objective",
    "estimate",
    "first_pass_slowdown",
    "import_statistics",
    "is_slower",
    "mad",
    "make_client",
    "objective_slower",
    "parse_prometheus",
    "percentile",
    "pooled_noise",
    "prometheus_series",
    "robust_score",
    "run_load",
    "stream_request",
]
