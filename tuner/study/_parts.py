from __future__ import annotations

from tuner.config import StudyConfig
from tuner.endpoint import Endpoint
from tuner.services import BaseService
from tuner.study._objective import TrialParts


def endpoint_for(config: StudyConfig) -> Endpoint:
    return Endpoint(base_url=config.target.base_url, model=config.target.model, api_key=config.target.api_key)


def http_parts(config: StudyConfig, service: BaseService) -> TrialParts:
    """The real thing: an HTTP load generator and the HumanEval gate against the server's endpoint."""
    from tuner.bench import HttpBenchmark
    from tuner.gate import HumanEvalGate, check_gate

    gate_section = config.gate if config.gate and config.gate.enabled else None
    return TrialParts(
        service=service,
        endpoint=endpoint_for(config),
        benchmark=lambda endpoint: HttpBenchmark(endpoint=endpoint, config=config.benchmark, dialect=config.dialect),
        gate=(lambda endpoint: HumanEvalGate(endpoint=endpoint, section=gate_section)) if gate_section else None,
        gate_policy=(lambda result: check_gate(result, gate_section)) if gate_section else None,
    )
