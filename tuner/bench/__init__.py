"""How a server is benchmarked: the benchmark seam and the HTTP load generator (its statistics: :mod:`tuner.stats`)."""

from tuner.bench._base import BaseBenchmark, ScenarioResult
from tuner.bench._http import HttpBenchmark
from tuner.bench._prompts import build_prompt
from tuner.bench._request import build_body, stream_request
from tuner.bench._server import parse_prometheus
from tuner.bench._warmup import FirstPasses, Slowdown, WarmupLookup, WarmupPlan, WarmupPolicy, first_pass_slowdown

__all__ = [
    "BaseBenchmark",
    "FirstPasses",
    "HttpBenchmark",
    "ScenarioResult",
    "Slowdown",
    "WarmupLookup",
    "WarmupPlan",
    "WarmupPolicy",
    "build_body",
    "build_prompt",
    "first_pass_slowdown",
    "parse_prometheus",
    "stream_request",
]
