"""The solver wrapper: HiGHS and CBC agree, infeasible is reported, statuses are honest."""

from __future__ import annotations

import random

import pulp
import pytest

from optimizer.ilp.solve import OPTIMAL, solve, solver_name


def _knapsack(seed: int, n: int = 14) -> tuple[pulp.LpProblem, float]:
    """A 0/1 knapsack and its optimum by enumeration (2^n subsets)."""
    rng = random.Random(seed)
    value = [rng.randint(1, 40) for _ in range(n)]
    weight = [rng.randint(1, 25) for _ in range(n)]
    cap = sum(weight) // 3
    prob = pulp.LpProblem("knapsack", pulp.LpMaximize)
    x = [pulp.LpVariable(f"x_{i}", cat="Binary") for i in range(n)]
    prob += pulp.lpSum(v * xi for v, xi in zip(value, x, strict=True))
    prob += pulp.lpSum(w * xi for w, xi in zip(weight, x, strict=True)) <= cap, "capacity"
    best = 0
    for mask in range(1 << n):
        w = sum(weight[i] for i in range(n) if mask >> i & 1)
        if w <= cap:
            best = max(best, sum(value[i] for i in range(n) if mask >> i & 1))
    return prob, float(best)


def _cbc_available() -> bool:
    return "PULP_CBC_CMD" in pulp.listSolvers(onlyAvailable=True)


def test_default_solver_is_in_process_highs() -> None:
    assert solver_name() == "HiGHS"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_highs_finds_the_enumerated_optimum(seed: int) -> None:
    prob, best = _knapsack(seed)
    result = solve(prob, time_limit_s=10)
    assert result.status == OPTIMAL and result.solver == "HiGHS"
    assert result.objective == pytest.approx(best)
    assert result.gap is not None and result.gap <= 1e-4


@pytest.mark.skipif(not _cbc_available(), reason="this PuLP ships no CBC (PuLP 4)")
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_cbc_fallback_agrees(seed: int) -> None:
    prob, best = _knapsack(seed)
    result = solve(prob, time_limit_s=10, solver="CBC")
    assert result.status == OPTIMAL and result.solver == "CBC"
    assert result.objective == pytest.approx(best)
    chosen = [name for name in result.values if result.chosen(name)]
    assert chosen  # binaries come back and are read with > 0.5


def test_infeasible_is_an_answer_not_an_error() -> None:
    prob = pulp.LpProblem("nothing_fits", pulp.LpMinimize)
    x = pulp.LpVariable("x", cat="Binary")
    prob += x
    prob += x >= 2, "impossible"
    result = solve(prob, time_limit_s=5)
    assert result.status == "Infeasible"
    assert result.objective is None and result.values == {}
