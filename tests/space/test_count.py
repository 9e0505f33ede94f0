"""How many distinct configurations a space holds (tune init never asks for more trials than that)."""

from __future__ import annotations

from tuner.space import Condition, Constraint, Param, SearchSpace, count_configs, param_values

DDTREE_ONLY = Condition(param="algorithm", values=("DDTREE",))


def test_conditions_and_constraints_are_applied() -> None:
    space = SearchSpace(
        params=(
            Param(name="algorithm", kind="categorical", choices=("DDTREE", "DFLASH")),
            Param(name="budget", kind="int", low=4, high=12, step=4, when=(DDTREE_ONLY,)),
            Param(name="block", kind="int", low=4, high=8, step=4),
            Param(name="window", kind="categorical", choices=("none", 4, 8), absent="none"),
        ),
        constraints=(Constraint(left="window", op=">=", right="block"),),
    )
    # block 4: window none/4/8 -> 3; block 8: none/8 -> 2; DDTREE x3 budgets + DFLASH x1 = 4 -> 4 * 5 = 20
    assert count_configs(space, limit=1000) == 20
    assert count_configs(space, limit=7) is None  # more than the limit: not counted further


def test_a_continuous_range_is_uncountable() -> None:
    space = SearchSpace(params=(Param(name="f", kind="float", low=0.7, high=0.9),))
    assert count_configs(space, limit=20) is None
    stepped = SearchSpace(params=(Param(name="f", kind="float", low=0.7, high=0.9, step=0.01),))
    assert count_configs(stepped, limit=1000) == 21
    assert [round(float(v), 2) for v in param_values(stepped.params[0]) or ()][::10] == [0.7, 0.8, 0.9]


def test_absent_choices_and_conditional_knobs_are_counted_once() -> None:
    drafting = (Condition(param="kind", values=("draft",)),)
    space = SearchSpace(
        params=(
            Param(name="kind", kind="categorical", choices=("draft", "none"), flag="--kind", absent="none"),
            Param(name="n_max", kind="int", low=1, high=3, flag="--max", when=drafting),
            Param(name="n_min", kind="int", low=0, high=2, flag="--min", when=drafting),
        ),
        constraints=(Constraint(left="n_min", op="<=", right="n_max"),),
    )
    # "none" once; "draft" with (min, max) pairs min <= max: 2 + 3 + 3.
    assert count_configs(space) == 1 + 8
    assert count_configs(space, limit=8) is None  # more than the limit: not counted further
    floats = SearchSpace(params=(Param(name="p", kind="float", low=0.0, high=1.0, flag="--p"),))
    assert count_configs(floats) is None
    stepped = SearchSpace(params=(Param(name="p", kind="float", low=0.0, high=0.9, step=0.1, flag="--p"),))
    assert count_configs(stepped) == 10
