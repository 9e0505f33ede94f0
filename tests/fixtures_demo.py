"""In-process studies: the demo study's space and scenarios, run against the model (no server, no HTTP)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tuner.config import StudyConfig, load_config

ROOT = Path(__file__).resolve().parents[1]
DEMO = (ROOT / "studies" / "demo.toml").read_text()

MakeConfig = Callable[..., StudyConfig]


@pytest.fixture
def make_config(tmp_path: Path) -> MakeConfig:
    """``make_config(name=..., search="key = value lines", edit=fn)``: the demo study, storage in tmp_path."""

    def make(*, name: str = "t", search: str = "", edit: Callable[[str], str] | None = None) -> StudyConfig:
        text = with_search(DEMO.replace('name = "demo"', f'name = "{name}"'), search)
        if edit:
            text = edit(text)
        path = tmp_path / f"{name}.toml"
        path.write_text(text)
        return load_config(path)

    return make


def with_search(text: str, search: str) -> str:
    """``text`` with the ``key = value`` lines of ``search`` in its ``[search]`` table (they replace the file's)."""
    keys = {line.partition("=")[0].strip() for line in search.splitlines() if "=" in line}
    out, section = [], ""
    for line in text.splitlines():
        if line.startswith("["):
            section = line.strip()
        elif section == "[search]" and "=" in line and line.partition("=")[0].strip() in keys:
            continue
        out.append(line)
    text = "\n".join(out) + "\n"
    if "\n[search]\n" in text:
        return text.replace("\n[search]\n", f"\n[search]\n{search}\n", 1)
    return text + f"\n[search]\n{search}\n"


def gate_when(when: str) -> Callable[[str], str]:
    """An ``edit`` for ``make_config``: the demo's ``[gate] when`` set to ``when``."""
    return lambda text: re.sub(r'^when = "\w+"', f'when = "{when}"', text, count=1, flags=re.MULTILINE)


def seeds(*trials: dict[str, object]) -> str:
    rows = ", ".join("{" + ", ".join(f"{k} = {v!r}" for k, v in t.items()) + "}" for t in trials)
    return f"seed_trials = [{rows}]".replace("'", '"')
