"""How answers are judged: the correctness-gate seam, the HumanEval gate and its sandbox."""

from tuner.gate._base import BaseGate, GateResult, ProblemOutcome
from tuner.gate._extract import assemble_program, extract_code, last_code_block, strip_reasoning
from tuner.gate._humaneval import HumanEvalGate, check_gate, render_prompt
from tuner.gate._problems import Problem, check_problems, load_problems, read_problem_file, select_problems
from tuner.gate._sandbox import (
    BaseJudge,
    NamespaceJudge,
    RlimitJudge,
    SandboxLimits,
    Verdict,
    default_judge,
    namespaces_available,
    sandbox_python,
)

__all__ = [
    "BaseGate",
    "BaseJudge",
    "GateResult",
    "HumanEvalGate",
    "NamespaceJudge",
    "Problem",
    "ProblemOutcome",
    "RlimitJudge",
    "SandboxLimits",
    "Verdict",
    "assemble_program",
    "check_gate",
    "check_problems",
    "default_judge",
    "extract_code",
    "last_code_block",
    "load_problems",
    "namespaces_available",
    "read_problem_file",
    "render_prompt",
    "sandbox_python",
    "select_problems",
    "strip_reasoning",
]
