"""How a server is benchmarked: the benchmark seam and the HTTP load generator (its statistics: :mod:`tuner.stats`)."""

from tuner.bench._alarm import ClientLoad, client_load
from tuner.bench._arrivals import arrival_schedule
from tuner.bench._base import BaseBenchmark, ScenarioResult
from tuner.bench._http import HttpBenchmark, RepeatCallback
from tuner.bench._latency import latency_figures, span_rate
from tuner.bench._load import LoadResult, LoadTarget, make_client, run_load
from tuner.bench._prompts import build_prompt
from tuner.bench._request import RequestRecord, RequestSpec, build_body, stream_request
from tuner.bench._server import ServerProbe, ServerSnapshot, acceptance_between, parse_prometheus, prometheus_series
from tuner.bench._slo import goodput_fields, pooled_slo_fields, slo_miss
from tuner.bench._sse import SSEDecoder
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
    "WARMUP_KINDS",
    "BaseBenchmark",
    "ClientLoad",
    "FirstPasses",
    "HttpBenchmark",
    "InProcessRunner",
    "LoadResult",
    "LoadRunner",
    "LoadTarget",
    "ProcessRunner",
    "RepeatCallback",
    "RequestRecord",
    "RequestSpec",
    "SSEDecoder",
    "ScenarioResult",
    "ServerProbe",
    "ServerSnapshot",
    "Slowdown",
    "WarmupLookup",
    "WarmupPlan",
    "WarmupPolicy",
    "acceptance_between",
    "arrival_schedule",
    "build_body",
    "build_prompt",
    "choose_processes",
    "client_load",
    "first_pass_slowdown",
    "goodput_fields",
    "latency_figures",
    "make_client",
    "parse_prometheus",
    "pooled_slo_fields",
    "prometheus_series",
    "run_load",
    "slo_miss",
    "span_rate",
    "stream_request",
]
