"""llama-server's renamed flags and what its launch command lacks, as `tune check` reports them."""

from __future__ import annotations

import pytest

from tuner.dialects import LlamaServerDialect, spec_types
from tuner.space import Param, SearchSpace

DIALECT = LlamaServerDialect(reason="test")


@pytest.mark.parametrize(
    ("flag", "types", "new"),
    [
        ("--draft-max", ["draft-simple"], "--spec-draft-n-max"),
        ("--draft", [], "--spec-draft-n-max"),
        ("--draft-n-min", ["draft-simple"], "--spec-draft-n-min"),
        ("--draft-max", ["ngram-mod"], "--spec-ngram-mod-n-max"),
        ("--spec-ngram-size-n", ["ngram-simple"], "--spec-ngram-simple-size-n"),
        ("--spec-ngram-size-m", ["ngram-map-k4v"], "--spec-ngram-map-k4v-size-m"),
        ("--spec-ngram-size-n", ["ngram-mod"], "--spec-ngram-mod-n-match"),
        ("--spec-ngram-size-n", ["ngram-simple", "ngram-map-k"], None),  # which one: the user says
        ("--spec-ngram-min-hits", [], None),
    ],
)
def test_the_replacement_of_a_removed_flag(flag: str, types: list[str], new: str | None) -> None:
    assert LlamaServerDialect.replacement(flag, types) == new


def test_spec_types_reads_every_spelling() -> None:
    argv = ["llama-server", "--spec-type", "ngram-simple,draft-simple", "--spec-type=ngram-mod", "--spec-type", "none"]
    assert spec_types(argv) == ["ngram-simple", "draft-simple", "ngram-mod"]


def test_a_removed_flag_in_the_command_is_a_problem_that_names_its_successor() -> None:
    argv = ["llama-server", "-m", "q.gguf", "--spec-type", "ngram-mod", "--draft-max=32", "--metrics"]
    assert DIALECT.command_problems(argv) == [
        "--draft-max: llama-server removed it (it exits at start); use --spec-ngram-mod-n-max"
    ]
    assert DIALECT.command_notes(argv) == []


def test_a_draft_model_that_drafts_nothing_and_no_counters_are_notes() -> None:
    notes = DIALECT.command_notes(["llama-server", "-m", "q.gguf", "--model-draft", "d.gguf"])
    assert notes == [
        "a draft model (-md) without --spec-type drafts nothing: add --spec-type draft-simple",
        "no --metrics in the command: acceptance length is not measured (its counters are there)",
    ]


def test_a_removed_flag_in_the_space_is_linted() -> None:
    space = SearchSpace(params=(Param(name="n", kind="int", low=1, high=8, flag="--draft-max"),))
    assert DIALECT.lint(space) == [
        "[space.n] --draft-max: llama-server removed it; use --spec-draft-n-max or --spec-ngram-mod-n-max"
    ]
