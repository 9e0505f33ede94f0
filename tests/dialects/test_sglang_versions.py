"""SGLang versions: how a version is named, found on a host, and what its log lines look like."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tuner.dialects import (
    DDTREE_BRANCH,
    LEGACY,
    MAINLINE,
    SGLangDialect,
    probe_command,
    renamed_flags,
    sglang_table,
    sglang_version,
    version_from_help,
    version_from_output,
)
from tuner.dialects._sglang_versions import VERSION_PROBE


def test_version_names() -> None:
    assert sglang_version("0.5.23") is MAINLINE and sglang_version("ddtree") is DDTREE_BRANCH
    assert sglang_version("ddtree-pr29907") is DDTREE_BRANCH
    old = sglang_version("0.5.10")
    assert old.table is None and old.markers == LEGACY.markers
    near = sglang_version("0.5.20.post1")
    assert near.table == "0.5.23" and not near.exact and "nearest known" in near.note
    with pytest.raises(ValueError):
        sglang_version("latest")


def test_renames_come_from_the_tables() -> None:
    renames = renamed_flags()
    assert renames["--speculative-dflash-draft-window-size"] == "--speculative-draft-window-size"
    assert renames["--cuda-graph-max-bs"] == "--cuda-graph-max-bs-decode"

def test_a_rename_is_suggested_only_where_the_new_spelling_exists() -> None:
    from tuner.dialects import spelling_verdict

    mainline = sglang_table("0.5.23")
    # Renamed in 0.5.x, and the new spelling itself is gone in 0.5.23: no "did you mean" into a dead end.
    assert renamed_flags()["--piecewise-cuda-graph-compiler"] == "--cuda-graph-tc-compiler"
    assert mainline.option("--cuda-graph-tc-compiler") is None
    verdict = spelling_verdict(MAINLINE, mainline, "--piecewise-cuda-graph-compiler")
    assert verdict is not None and verdict.ok is False and "did you mean" not in verdict.text
    verdict = spelling_verdict(MAINLINE, mainline, "--speculative-dflash-draft-window-size")
    assert verdict is not None and "did you mean --speculative-draft-window-size" in verdict.text


def _render(template: str, values: dict[str, str]) -> str:
    """A message template with its ``{expr}`` fields filled (known ones by name, the rest with a number)."""
    field = r"\{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}"
    return re.sub(field, lambda m: values.get(m.group(1).split(":")[0], "1.00"), template)


@pytest.mark.parametrize("name", ["0.5.23", "ddtree-pr29907"])
def test_each_phase_marker_matches_the_versions_own_log_line(name: str) -> None:
    messages = sglang_table(name).messages
    values = {"capture_name": "target verify", "graph_backend[model_runner.device]": "CUDA graph",
              "graph_backend[self.device]": "CUDA graph"}
    lines = {key: _render(messages[key], values) for key in ("load_weight_begin", "load_weight_end",
                                                           "capture_graph_begin", "capture_graph_end", "server_ready")}
    assert lines["capture_graph_end"].startswith("Capture target verify CUDA graph end. ")

    def phase(line: str) -> str | None:
        found = [label for label, p in SGLangDialect.phase_markers if re.search(p, line)]
        return found[0] if found else None

    assert phase(lines["load_weight_begin"]) == "loading weights"
    assert phase(lines["load_weight_end"]) == "capturing cuda graphs"
    assert phase(lines["capture_graph_begin"]) == "capturing cuda graphs"
    assert phase(lines["capture_graph_end"]) == "warming up"
    assert phase(lines["server_ready"]) == "serving"
    assert phase("[2026-07-01 10:00:00 TP0] Capture cuda graph end. Time elapsed: 12.3 s") == "warming up"  # <=0.5.10


def test_health_endpoints_are_the_versions_own() -> None:
    for version in (MAINLINE, DDTREE_BRANCH):
        assert version.flags is not None
        assert set(version.health) <= set(version.flags.endpoints)


def test_init_torch_distributed_is_gone_in_0_5_23() -> None:
    assert "init_torch_distributed" not in sglang_table("0.5.23").messages
    assert sglang_table("ddtree-pr29907").messages["init_torch_distributed"].startswith("Init torch distributed")


def test_versions_from_what_a_host_prints() -> None:
    assert version_from_output("sglang 0.5.23 mainline /venv/lib/sglang") is MAINLINE
    assert version_from_output("sglang 0.5.15.post1 ddtree /src/sglang/python/sglang") is DDTREE_BRANCH
    assert version_from_output("sglang: not installed") is None
    assert version_from_output("0.5.9") is not None and version_from_output("0.5.9").table is None  # type: ignore[union-attr]
    guessed = version_from_help({"--speculative-ddtree-budget", "--port"})
    assert guessed is not None and guessed.table == DDTREE_BRANCH.table and not guessed.exact
    assert version_from_help({"--speculative-draft-window-size"}).table == "0.5.23"  # type: ignore[union-attr]
    assert version_from_help({"--port"}) is None
    assert probe_command(["/root/venv/bin/python3.11", "-m", "sglang.launch_server"]) is not None
    assert probe_command(["sglang", "serve"]) is None


def _fake_install(root: Path, version: str, *, ddtree: bool) -> Path:
    """A package directory the way pip leaves one: the code and its dist-info (no torch, nothing importable)."""
    pkg = root / "sglang"
    (pkg / "srt" / "speculative").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('importing sglang needs torch')\n")
    if ddtree:
        (pkg / "srt" / "speculative" / "ddtree_worker.py").write_text("")
    info = root / f"sglang-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
    return root


@pytest.mark.parametrize(("version", "ddtree", "expected"), [("0.5.23", False, MAINLINE),
                                                              ("0.5.15.post1", True, DDTREE_BRANCH)])
def test_the_probe_reads_an_installed_sglang_without_importing_it(
    tmp_path: Path, version: str, ddtree: bool, expected: object
) -> None:
    root = _fake_install(tmp_path, version, ddtree=ddtree)
    out = subprocess.run([sys.executable, "-c", VERSION_PROBE], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(root)}).stdout
    assert version_from_output(out) is expected, out
    bare = subprocess.run([sys.executable, "-I", "-c", VERSION_PROBE], capture_output=True, text=True, check=True)
    assert bare.stdout.strip() == "sglang: not installed"


@pytest.mark.parametrize("algorithm", ["DFLASH", "dflash", "EAGLE3", None])
def test_ddtree_knobs_are_inert_under_any_other_algorithm(algorithm: str | None) -> None:
    argv = ["python3", "-m", "sglang.launch_server", "--speculative-ddtree-budget", "12"]
    argv += ["--speculative-algorithm", algorithm] if algorithm else []
    inert = SGLangDialect(reason="test").inert(argv, {"SGLANG_DDTREE_MAX_TOPK": "6"})
    assert {"--speculative-ddtree-budget", "SGLANG_DDTREE_MAX_TOPK"} <= inert
    assert "--speculative-dflash-block-size" not in inert


def test_ddtree_uses_them() -> None:
    argv = ["python3", "-m", "sglang.launch_server", "--speculative-algorithm", "DDTREE"]
    assert SGLangDialect(reason="test").inert(argv, {}) == frozenset()
