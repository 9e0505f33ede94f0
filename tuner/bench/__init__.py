"""How a server is benchmarked: the benchmark seam and the HTTP load generator (its statistics: :mod:`tuner.stats`)."""

from tuner.bench._arrivals import arrival_schedule
from tuner.bench._base import BaseBenchmark, ScenarioResult
from tuner.bench._http import HttpBenchmark
from tuner.bench._latency import latency_figures
from tuner.bench._load import LoadResult, MeasuredWindow
from tuner.bench._prompts import build_prompt
from tuner.bench._request import RequestRecord, build_body, stream_request
from tuner.bench._server import parse_prometheus
from tuner.bench._slo import goodput_fields, pooled_slo_fields
from tuner.bench._warmup import FirstPasses, Slowdown, WarmupLookup, WarmupPlan, WarmupPolicy, first_pass_slowdown

__all__ = [
    "BaseBenchmark",
    "FirstPasses",
    "HttpBenchmark",
    "LoadResult",
    "MeasuredWindow",
    "RequestRecord",
    "ScenarioResult",
    "Slowdown",
    "WarmupLookup",
    "WarmupPlan",
    "WarmupPolicy",
    "arrival_schedule",
    "build_body",
    "build_prompt",
    "first_pass_slowdown",
    "goodput_fields",
    "latency_figures",
    "parse_prometheus",
    "pooled_slo_fields",
    "stream_request",
]
