"""A test's first counted pass, as the machine let it run or with its client stalled on purpose.

tune runs a measured pass again when its client stalled (``tuner.bench._alarm``); the ``client_rerun`` fixture
(tests/conftest.py) runs each test that plants a one-time event in a server during a pass, or reads a pass from
the server's own records, both ways.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: The planted client stall (tuner.bench._planted): far above the client-bound bound of the tests that take it
#: (10% of a request's latency, at least 50 ms), and short beside their passes.
PLANTED_STALL_S = 1.0
#: A real server's requests wait seconds for its slot (10% of that is the bound): 1 s was under it on a 2-core
#: machine at a load average of 15.
REAL_SERVER_STALL_S = 5.0


@dataclass(frozen=True)
class ClientRerun:
    """How a test's first counted pass ran: as the machine let it, or with its client stalled on purpose, so that
    tune ran it again (``forced``)."""

    forced: bool
    stall_file: Path | None = None

    def lasting(self, seconds: float) -> None:
        """Make the planted stall this long (it must exceed the client-bound bound: 10% of a request's median
        latency, which a real server's queue can take to seconds)."""
        if self.stall_file is not None:
            self.stall_file.write_text(str(seconds))

    def check(self, reruns: int | None = None) -> None:
        """When forced: the stall was planted (its file taken), and the pass was run again (``reruns``, when the
        test has a result; a pass that failed is not run again)."""
        if self.stall_file is None:
            return
        left = [p for p in (self.stall_file, Path(f"{self.stall_file}.armed")) if p.exists()]
        assert not left, f"the planted client stall was never taken: {left}"
        assert reruns is None or reruns >= 1, "the pass whose client stalled was not run again"
