"""Extraction: thinking models' answers to runnable HumanEval programs (pure functions, no processes)."""

from __future__ import annotations

import pytest

from tuner.gate import assemble_program, extract_code, last_code_block, strip_reasoning

PROMPT = 'from typing import List\n\n\ndef add(xs: List[int]) -> int:\n    """Sum."""\n'


def test_inline_think_block_is_dropped() -> None:
    text = "<think>maybe ```python\nwrong()\n```</think>\nHere:\n```python\nright()\n```"
    assert extract_code(text) == "right()"


def test_unclosed_think_swallows_the_rest() -> None:
    # Ran out of tokens while thinking: the draft inside the reasoning must not be judged as the answer.
    assert strip_reasoning("Intro <think>```python\ndraft()\n```") == "Intro"
    assert extract_code("<think>still thinking ```python\ndraft()\n```") == ""


def test_stray_closing_tag_means_the_template_opened_the_block() -> None:
    assert extract_code("reasoning ```python\nno()\n```\n</think>\n```python\nyes()\n```") == "yes()"


def test_several_blocks_take_the_last() -> None:
    text = "Draft:\n```python\ndef f():\n    pass\n```\nFixed:\n```python\ndef f():\n    return 1\n```\nDone."
    assert extract_code(text) == "def f():\n    return 1"


@pytest.mark.parametrize("fence", ["```python", "```py", "```", "```Python3", "~~~python"])
def test_fence_flavours(fence: str) -> None:
    closing = fence[:3]
    assert last_code_block(f"x\n{fence}\ncode()\n{closing}\ny") == "code()\n"


def test_non_python_blocks_are_skipped() -> None:
    text = "```python\nanswer()\n```\nRun it with:\n```bash\npython x.py\n```"
    assert extract_code(text) == "answer()"


def test_no_fences_falls_back_to_raw_text() -> None:
    assert extract_code("<think>hmm</think>\n    return sum(xs)\n") == "    return sum(xs)"


def test_closing_fence_glued_to_the_last_line() -> None:
    text = "```python\ndef f():\n    return 1```\n\nDone."
    assert extract_code(text) == "def f():\n    return 1"


def test_truncated_last_block_still_yields_its_code() -> None:
    assert extract_code("```python\ndef f():\n    return 1\n") == "def f():\n    return 1"


def test_reasoning_content_field_is_never_parsed() -> None:
    # The gate passes only `content` to extract_code; the separate reasoning never reaches it.
    assert extract_code("Final:\n```python\nok()\n```") == "ok()"


def test_final_answer_marker_wins_over_earlier_text() -> None:
    text = "Let me try:\n    return 0\n\n**Final Answer:**\n```python\nreturn_this()\n```\n"
    assert extract_code(text) == "return_this()"
    # Text before a marker with no code is still used (marker without an answer is ignored).
    bare = "Let me try\n```python\nkeep()\n```\nFinal answer: see above."
    assert extract_code(bare) == "keep()"
    raw = "thinking aloud\nFinal answer:\n    return sum(xs)"
    assert extract_code(raw) == "    return sum(xs)"


def test_body_is_appended_to_the_prompt() -> None:
    program = assemble_program(prompt=PROMPT, code="    return sum(xs)", entry_point="add")
    assert program == PROMPT + "    return sum(xs)\n"


def test_flush_left_body_is_indented() -> None:
    program = assemble_program(prompt=PROMPT, code="total = sum(xs)\nreturn total", entry_point="add")
    assert program.endswith("    total = sum(xs)\n    return total\n")
    compile(program, "x", "exec")


def test_full_definition_is_used_as_is_after_the_prompts_imports() -> None:
    code = "def add(xs: List[int]) -> int:\n    return sum(xs)"
    program = assemble_program(prompt=PROMPT, code=code, entry_point="add")
    assert program.startswith("from typing import List")
    assert program.count("def add(") == 1
    namespace: dict[str, object] = {}
    exec(compile(program, "x", "exec"), namespace)  # our own fixed test string, not model output
    assert namespace["add"]([1, 2]) == 3  # type: ignore[operator]


def test_full_definition_keeps_helpers_defined_in_the_prompt() -> None:
    prompt = 'def helper(x):\n    return x * 2\n\n\ndef main(x):\n    """Doc."""\n'
    program = assemble_program(prompt=prompt, code="def main(x):\n    return helper(x) + 1", entry_point="main")
    assert "def helper(" in program and program.rstrip().endswith("return helper(x) + 1")


def test_a_different_function_name_is_not_a_full_definition() -> None:
    program = assemble_program(prompt=PROMPT, code="def adder():\n    pass", entry_point="add")
    assert program.startswith(PROMPT)
