from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixtures_faults import Case


@pytest.fixture
def case(tmp_path: Path, port: int) -> Iterator[Case]:
    c = Case(tmp_path, port)
    try:
        yield c
    finally:
        c.cleanup()
