"""The suite's xdist groups hold (tests/conftest.py): with `--dist loadgroup` every test of a group runs on one
worker, so a group's shared server or study is started once and its tests never run beside each other.

pytest-xdist carries a test's group in its node id; pytest 9.2 made that rewrite a silent no-op
(pytest-dev/pytest-xdist#1386): the groups were spread over every worker, three llama.cpp servers ran at once on
two cores and the report's study was built on three workers. This runs a group's quick tests the way
scripts/test.sh does and checks where they ran.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_group_runs_on_one_worker() -> None:
    argv = [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider",
            "tests/report/test_map.py", "tests/report/test_latency.py"]  # fmt: skip
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120).stdout
    ran = re.findall(r"^\[(gw\d+)\] .*PASSED (\S+)", out, flags=re.M)
    assert len(ran) == 5, out[-2000:]
    assert {worker for worker, _ in ran} == {ran[0][0]}, ran  # one worker...
    assert all(test.endswith("@report-study") for _, test in ran), ran  # ...because they are one group
