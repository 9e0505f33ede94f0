from __future__ import annotations

from tuner.config import StudyConfig
from tuner.study._objective import TrialParts
from tuner.target import Target

__all__ = ["http_parts"]


def http_parts(config: StudyConfig, target: Target) -> TrialParts:
    """The real thing: an HTTP load generator and the HumanEval gate against the server's endpoint."""
    from tuner.bench import HttpBenchmark
    from tuner.gate import HumanEvalGate, check_gate

    gate_section = config.gate if config.gate and config.gate.enabled else None
    return TrialParts(
        target=target,
        benchmark=lambda endpoint: HttpBenchmark(endpoint=endpoint, config=config.benchmark, dialect=config.dialect),
        gate=(lambda endpoint: HumanEvalGate(endpoint=endpoint, section=gate_section)) if gate_section else None,
        gate_policy=(lambda result: check_gate(result, gate_section)) if gate_section else None,
    )
