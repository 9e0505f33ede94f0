from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixtures_postgres import postgres_url
from fixtures_study import study_toml

from tuner.config import StudyConfig, load_config

__all__ = ["postgres_url"]

MakeConfig = Callable[..., StudyConfig]


@pytest.fixture
def make_config(tmp_path: Path, port: int) -> MakeConfig:
    def make(
        *, name: str = "t", on_exit: str = "stop", search: str = "", edit: Callable[[str], str] | None = None
    ) -> StudyConfig:
        text = study_toml(name=name, port=port, on_exit=on_exit, search=search)
        if edit:
            text = edit(text)
        path = tmp_path / f"{name}.toml"
        path.write_text(text)
        return load_config(path)

    return make
