"""Other servers than the model's own, for benchmarks that need two related landscapes (a warm start's).

A :class:`ModelVariant` is a scaling of the model's outputs, not another model: the same flags fail the same way
and take the same memory, but the drafter accepts a different share of its tokens, the steps run at another speed
and a wide verify pass costs more or less. That is what changes between two deployments of one server family
(another drafter or target model, another GPU generation): the optimum moves, the landscape stays related.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tuner.config import Scenario
from tuner.sim import ServerConfig
from tuner.sim._model import verify_width
from tuner.sim._scheduler import PREFILL_S_PER_TOKEN

if TYPE_CHECKING:
    from tuner.sim.inprocess._truth import ModelledScenario

__all__ = ["VARIANTS", "ModelVariant"]


@dataclass(frozen=True, kw_only=True)
class ModelVariant:
    """How another server's figures differ from the model's, scenario by scenario."""

    name: str
    acceptance: float = 1.0
    """Drafted tokens accepted per step relative to the model's: acceptance length ``1 + acceptance * (L - 1)``
    (another drafter, or another target model the same drafter predicts better or worse)."""
    decode_speed: float = 1.0
    """Decode steps run this many times as fast (another GPU's memory bandwidth); prefill keeps its pace."""
    prefill_speed: float = 1.0
    """Prefill runs this many times as fast (another GPU's compute)."""
    verify_cost: float = 0.0
    """A step takes ``(verify width / 8) ** verify_cost`` times as long: above 0, a GPU on which a wide verify pass
    (a big tree or block) costs more than on the model's, relative to a block of 8; below 0, less."""

    def __post_init__(self) -> None:
        if min(self.acceptance, self.decode_speed, self.prefill_speed) <= 0:
            raise ValueError(f"variant {self.name}: acceptance and speeds must be > 0")

    def __call__(self, cfg: ServerConfig, scenario: Scenario, m: ModelledScenario) -> ModelledScenario:
        """``m`` (``cfg`` serving ``scenario``) as this variant's server would give it: the same steps, another
        acceptance and pace."""
        if m.died is not None or m.seconds <= 0:
            return m
        accept = 1.0 + self.acceptance * (m.accept_length - 1.0)
        # Every request is prefilled once; the rest of a scenario's time is decode steps, of which a request
        # needs output / acceptance.
        prefill = PREFILL_S_PER_TOKEN * scenario.prompt_tokens * scenario.requests
        decode = max(0.0, m.seconds - prefill)
        pace = (verify_width(cfg) / 8) ** self.verify_cost / self.decode_speed
        steps = m.accept_length / accept * pace
        seconds = prefill / self.prefill_speed + decode * steps
        return dataclasses.replace(
            m,
            tok_s=m.tok_s * m.seconds / seconds,
            per_stream_tok_s=m.per_stream_tok_s / steps,
            accept_length=accept,
            seconds=seconds,
        )


#: The warm-start benchmark's servers (scripts/bench_search.py --warm-start).
VARIANTS = {
    v.name: v
    for v in (
        ModelVariant(name="model"),
        ModelVariant(name="related", acceptance=0.85, decode_speed=1.3, prefill_speed=1.6, verify_cost=0.1),
        ModelVariant(name="different", acceptance=1.2, decode_speed=0.8, verify_cost=-0.3),
    )
}
