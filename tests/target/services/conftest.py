"""The private sshd + systemd stand-in fixtures (see tests/fixtures_sshd.py)."""

import sys
from pathlib import Path

# tests/ has no __init__.py: make the shared fixture module importable from every folder that needs it.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fixtures_sshd import private_sshd, sim_unit, sshd

__all__ = ["private_sshd", "sim_unit", "sshd"]
