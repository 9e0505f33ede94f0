"""How many distinct configurations a space holds (tune init never asks for more trials than that)."""

from __future__ import annotations

from tuner.space import Condition, Constraint, Param, SearchSpace, count_configs

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
    assert count_configs(space, stop_at=1000) == 20
    assert count_configs(space, stop_at=7) == 7


def test_a_continuous_range_is_uncountable() -> None:
    space = SearchSpace(params=(Param(name="f", kind="float", low=0.7, high=0.9),))
    assert count_configs(space, stop_at=20) is None
    stepped = SearchSpace(params=(Param(name="f", kind="float", low=0.7, high=0.9, step=0.01),))
    assert count_configs(stepped, stop_at=1000) == 21
