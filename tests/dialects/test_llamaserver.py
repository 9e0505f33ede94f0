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


BASE = ["llama-server", "-m", "t.gguf", "-md", "d.gguf"]
DRAFTING = {"--spec-draft-n-max", "--spec-draft-n-min", "--spec-draft-p-min", "--draft-p-min", "--spec-draft-p-split"}


@pytest.mark.parametrize("types", [[], ["--spec-type", "none"], ["--spec-type", "ngram-simple"]])
def test_the_draft_models_knobs_are_inert_without_a_model_drafter(types: list[str]) -> None:
    inert = DIALECT.inert([*BASE, *types, "--spec-draft-n-max", "2"], {})
    assert inert >= DRAFTING and "LLAMA_ARG_SPEC_DRAFT_N_MAX" in inert
    assert "--spec-type" not in inert and "-md" not in inert  # the draft model still loads: memory, start-up


@pytest.mark.parametrize("drafter", ["draft-simple", "draft-dflash", "ngram-mod,draft-eagle3"])
def test_a_model_drafter_uses_them(drafter: str) -> None:
    assert not DRAFTING & DIALECT.inert([*BASE, "--spec-type", drafter, "--spec-draft-n-max", "8"], {})


def test_the_spec_type_may_come_from_its_environment_twin() -> None:
    assert not DRAFTING & DIALECT.inert([*BASE, "--spec-draft-n-max", "8"], {"LLAMA_ARG_SPEC_TYPE": "draft-simple"})
    # The command line overrides the environment (common/arg.cpp).
    argv = [*BASE, "--spec-type", "none", "--spec-draft-n-max", "8"]
    assert DIALECT.inert(argv, {"LLAMA_ARG_SPEC_TYPE": "draft-simple"}) >= DRAFTING


def test_an_ngram_drafters_sizes_belong_to_that_drafter_alone() -> None:
    argv = [*BASE, "--spec-type", "ngram-map-k4v", "--spec-ngram-map-k4v-size-n", "4", "--spec-ngram-map-k-size-n",
            "3", "--spec-ngram-mod-n-max=32"]  # fmt: skip
    inert = DIALECT.inert(argv, {})
    assert {"--spec-ngram-map-k-size-n", "--spec-ngram-mod-n-max"} <= inert
    assert "--spec-ngram-map-k4v-size-n" not in inert
