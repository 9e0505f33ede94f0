"""How a server is benchmarked: the benchmark seam, the HTTP load generator and the stream-client seam under it
(:class:`BaseStreamClient`, one implementation per HTTP library, chosen by name with :func:`stream_client`); its
statistics: :mod:`tuner.stats`."""

from tuner.bench._arrivals import arrival_schedule
from tuner.bench._base import BaseBenchmark, ScenarioResult
from tuner.bench._capacity import LiveServer, study_fits
from tuner.bench._client import BaseStreamClient
from tuner.bench._clients import STREAM_CLIENTS, stream_client
from tuner.bench._http import HttpBenchmark
from tuner.bench._latency import latency_figures
from tuner.bench._load import LoadResult, MeasuredWindow
from tuner.bench._prompts import build_prompt
from tuner.bench._record import RequestRecord, build_body
from tuner.bench._slo import goodput_fields, pooled_slo_fields
from tuner.bench._warmup import FirstPasses, Slowdown, WarmupLookup, WarmupPlan, WarmupPolicy, first_pass_slowdown

__all__ = [
    "STREAM_CLIENTS",
    "BaseBenchmark",
    "BaseStreamClient",
    "FirstPasses",
    "HttpBenchmark",
    "LiveServer",
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
    "pooled_slo_fields",
    "stream_client",
    "study_fits",
]
