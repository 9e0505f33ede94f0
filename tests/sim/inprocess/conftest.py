"""The demo study as an in-process config factory (see tests/fixtures_demo.py)."""

import sys
from pathlib import Path

# tests/ has no __init__.py: make the shared fixture module importable from every folder that needs it.
sys.path.insert(0, str(Path(__file__).resolve().parents[2 if "inprocess" in __file__ else 1]))

from fixtures_demo import MakeConfig, gate_when, make_config, seeds

__all__ = ["MakeConfig", "gate_when", "make_config", "seeds"]
