"""``kind = "goodput"``: the weighted geometric mean of the scenarios' goodput, the rate of the requests that met
the SLO (DistServe's measure, ``vllm bench serve --goodput``), as a lower bound.

Scored, pruned and confirmed as the throughput geomean is (:mod:`tuner.objective._geomean`), on the goodput figure
the metric registry defines (``goodput_rps``, or ``goodput_tok_s``): a config that serves fast but late scores what
it served on time.
"""

from __future__ import annotations

from tuner.objective._base import register
from tuner.objective._geomean import GeomeanObjective

__all__ = ["GoodputObjective"]


@register
class GoodputObjective(GeomeanObjective):
    kind = "goodput"
