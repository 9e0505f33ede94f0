"""In-process studies: the demo study's space and scenarios, run against the model (no server, no HTTP)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import tuner.services  # noqa: F401  (before tuner.config, as the CLI does)
import tuner.study._loop as loop
from tuner.config import StudyConfig, load_config
from tuner.search import make_pruner, make_sampler

ROOT = Path(__file__).resolve().parents[2]
DEMO = (ROOT / "studies" / "demo.toml").read_text()

MakeConfig = Callable[..., StudyConfig]


@pytest.fixture(autouse=True)
def search_in_loop(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The loop builds tuner.search's sampler and pruner (a no-op once tuner.study imports them itself)."""
    monkeypatch.setattr(loop, "make_sampler", make_sampler)
    monkeypatch.setattr(loop, "make_pruner", make_pruner)
    yield


@pytest.fixture
def make_config(tmp_path: Path) -> MakeConfig:
    """``make_config(name=..., search="key = value lines", edit=fn)``: the demo study, storage in tmp_path."""

    def make(*, name: str = "t", search: str = "", edit: Callable[[str], str] | None = None) -> StudyConfig:
        text = DEMO.replace('name = "demo"', f'name = "{name}"')
        text += f"\n[search]\n{search}\n"
        if edit:
            text = edit(text)
        path = tmp_path / f"{name}.toml"
        path.write_text(text)
        return load_config(path)

    return make


def seeds(*trials: dict[str, object]) -> str:
    rows = ", ".join("{" + ", ".join(f"{k} = {v!r}" for k, v in t.items()) + "}" for t in trials)
    return f"seed_trials = [{rows}]".replace("'", '"')
