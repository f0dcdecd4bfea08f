"""The solver wrapper: HiGHS and CBC agree, infeasible is reported, statuses are honest."""

from __future__ import annotations

import random
from typing import Any

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


def _models() -> list[pulp.LpProblem]:
    """Knapsacks (maximise, binary) and a mixed model: integer and continuous columns, free and
    bounded ones, =, <= and >= rows, a zero coefficient, a column only in the objective."""
    out = [_knapsack(seed)[0] for seed in range(3)]
    m = pulp.LpProblem("mixed", pulp.LpMinimize)
    a = pulp.LpVariable("a", lowBound=0, upBound=10, cat="Integer")
    b = pulp.LpVariable("b", lowBound=None)  # free
    c = pulp.LpVariable("c", lowBound=-3, upBound=7.5)
    d = pulp.LpVariable("d", cat="Binary")
    m += 3 * a - 2 * b + 0.5 * c + 7 * d
    m += a + b == 4, "balance"
    m += pulp.LpAffineExpression([(a, 2), (c, 0), (d, -1)]) <= 9, "with_zero"
    m += b - c >= -20, "floor"
    out.append(m)
    return out


def _highs_lp(problem: pulp.LpProblem, solver: Any) -> dict[str, Any]:
    import highspy

    from optimizer.ilp.solve import _swallow_highs_banner

    _swallow_highs_banner()
    problem.solverModel = highspy.Highs()
    problem.solverModel.setOptionValue("output_flag", False)
    solver.buildSolverModel(problem)
    lp = problem.solverModel.getLp()
    dense = [[0.0] * lp.num_col_ for _ in range(lp.num_row_)]
    m = lp.a_matrix_
    rowwise = m.format_ == highspy.MatrixFormat.kRowwise
    for outer in range(len(m.start_) - 1):
        for k in range(m.start_[outer], m.start_[outer + 1]):
            r, col = (outer, m.index_[k]) if rowwise else (m.index_[k], outer)
            dense[r][col] = m.value_[k]
    return {
        "cols": lp.num_col_, "rows": lp.num_row_, "cost": list(lp.col_cost_), "col_lower": list(lp.col_lower_),
        "col_upper": list(lp.col_upper_), "row_lower": list(lp.row_lower_), "row_upper": list(lp.row_upper_),
        "integrality": [int(t) for t in lp.integrality_] or [0] * lp.num_col_, "matrix": dense,
        "var_index": [v.index for v in problem.variables()],
        "row_index": [c.index for c in problem.constraints.values()],
    }


@pytest.mark.parametrize("i", range(4))
def test_the_bulk_model_is_the_one_pulp_builds_call_by_call(i: int) -> None:
    """``solve`` hands HiGHS the model in a few array calls; it is PuLP's own model, column for
    column and row for row."""
    from optimizer.ilp.solve import _BulkHiGHS

    if "HiGHS" not in pulp.listSolvers(onlyAvailable=True):
        pytest.skip("highspy not installed")
    pulp_built = _highs_lp(_models()[i], pulp.HiGHS(msg=False))
    bulk_built = _highs_lp(_models()[i], _BulkHiGHS(msg=False))
    assert bulk_built == pulp_built
    assert bulk_built["rows"] > 0 and any(bulk_built["integrality"])


def test_the_mixed_model_solves_to_its_optimum() -> None:
    m = _models()[3]
    r = solve(m, time_limit_s=10)
    # b = 4 - a; cost 3a - 2(4 - a) + 0.5c + 7d = 5a - 8 + 0.5c + 7d; a = 0, c = -3, d = 0.
    assert r.status == OPTIMAL and r.objective == pytest.approx(-9.5)
    assert r.integer("a") == 0 and r.values["c"] == pytest.approx(-3.0)


def test_a_threads_highs_is_reused_cleared_between_solves() -> None:
    """Each thread solves on one HiGHS instance, cleared first: a solve after others (larger,
    infeasible, with a gap or a time limit set) gives what it gives on a new thread, with the
    default options again, and no problem keeps the instance."""
    import importlib
    import threading

    solve_mod = importlib.import_module("optimizer.ilp.solve")

    prob, best = _knapsack(5)
    first = solve(prob, time_limit_s=10)
    assert prob.solverModel is None  # let go: the next solve clears the instance
    h = solve_mod._THREAD_HIGHS.highs
    big, _ = _knapsack(6, n=16)
    solve(big, time_limit_s=3, gap_rel=0.5)
    bad = pulp.LpProblem("bad", pulp.LpMinimize)
    y = pulp.LpVariable("y", lowBound=0, upBound=1)
    bad += y
    bad += y >= 2, "impossible"
    assert solve(bad).status == "Infeasible"
    again_prob, _ = _knapsack(5)
    again = solve(again_prob, time_limit_s=10)
    assert solve_mod._THREAD_HIGHS.highs is h  # one instance on this thread
    assert (again.status, again.objective, again.values, again.gap) == (first.status, first.objective,
                                                                        first.values, first.gap)
    assert again.objective == pytest.approx(best)
    cleared = solve_mod._cleared_highs()
    assert cleared.getOptionValue("mip_rel_gap")[1] == pytest.approx(1e-4)  # the gap set above is gone
    assert cleared.getNumCol() == 0

    got: list[Any] = []
    other_prob, _ = _knapsack(5)
    t = threading.Thread(target=lambda: got.append((solve(other_prob, time_limit_s=10),
                                                    solve_mod._THREAD_HIGHS.highs)))
    t.start()
    t.join()
    (other, other_h), = got
    assert other_h is not h
    assert (other.objective, other.values) == (first.objective, first.values)


def _solver_spy(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The solver objects ``solve`` makes, to read which way each solve went."""
    import importlib

    solve_mod = importlib.import_module("optimizer.ilp.solve")
    made: list[Any] = []
    real = solve_mod._solver

    def spy(*a: Any, **kw: Any) -> Any:
        made.append(real(*a, **kw))
        return made[-1]

    monkeypatch.setattr(solve_mod, "_solver", spy)
    return made


def _choose_cheapest(costs: list[float]) -> pulp.LpProblem:
    """Pick one of several binaries at least cost: the relaxation's optimum is a whole vertex."""
    prob = pulp.LpProblem("pick", pulp.LpMinimize)
    x = [pulp.LpVariable(f"x_{i}", cat="Binary") for i in range(len(costs))]
    prob += pulp.lpSum(c * v for c, v in zip(costs, x, strict=True))
    prob += pulp.lpSum(x) == 1, "one"
    return prob


def test_an_integral_relaxation_is_the_answer_with_gap_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    made = _solver_spy(monkeypatch)
    costs = [7.5, 3.25, 9.0, 4.0]
    plain = solve(_choose_cheapest(costs), time_limit_s=10)
    first = solve(_choose_cheapest(costs), time_limit_s=10, relaxation_first=True)
    assert [m.relaxation_integral for m in made] == [False, True]
    assert first.status == OPTIMAL and first.gap == 0.0
    assert first.objective == plain.objective == 3.25
    assert first.values == plain.values == {"x_0": 0.0, "x_1": 1.0, "x_2": 0.0, "x_3": 0.0}
    assert all(v.is_integer() for v in first.values.values())  # whole, as a search reports them


@pytest.mark.parametrize("seed", [1, 2, 4])  # seed 3's relaxation happens to be whole
def test_a_fractional_relaxation_falls_back_to_the_search(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A knapsack's relaxation takes part of an item: the integer search runs as without the option."""
    made = _solver_spy(monkeypatch)
    prob, best = _knapsack(seed)
    plain = solve(prob, time_limit_s=10)
    prob2, _ = _knapsack(seed)
    first = solve(prob2, time_limit_s=10, relaxation_first=True)
    assert [m.relaxation_integral for m in made] == [False, False]
    assert (first.status, first.objective, first.values, first.gap) == (plain.status, plain.objective,
                                                                        plain.values, plain.gap)
    assert first.objective == pytest.approx(best)


def test_relaxation_first_on_random_portfolios(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plans' models (machines, commitments, quotas, whole and continuous runs), solved both ways,
    some from a warm start: the same status; where the relaxation was whole it is the optimum (never
    dearer than the search's answer, which may stop within its gap) and every integer column is
    whole; where it was not, the search ran exactly as without the option: the same values and gap."""
    from optimizer.ilp.portfolio import build_portfolio
    from tests.unit.test_portfolio_rows import _case

    made = _solver_spy(monkeypatch)
    rng = random.Random(11)
    took = fell_back = warm = 0
    for _ in range(80):
        jobs, builds, months, kw = _case(rng)
        # A start, as a plan hands its rounded answer: here the model's own optimum.
        probe = solve(build_portfolio(jobs, builds, months, **kw).problem, time_limit_s=10)
        start = None
        if probe.has_solution and rng.random() < 0.5:
            start = dict(probe.values)
        plain = solve(build_portfolio(jobs, builds, months, **kw).problem, time_limit_s=10, gap_rel=1e-3,
                      warm_start=start)
        mdl = build_portfolio(jobs, builds, months, **kw)
        first = solve(mdl.problem, time_limit_s=10, gap_rel=1e-3, warm_start=start, relaxation_first=True)
        assert first.status == plain.status
        if not first.has_solution:
            continue
        assert plain.objective is not None
        if made[-1].relaxation_integral:
            took += 1
            assert first.gap == 0.0
            assert first.objective <= plain.objective + 1e-6 * max(1.0, abs(plain.objective))
            ints = {v.name for v in mdl.problem.variables() if v.cat == pulp.LpInteger}
            assert all(first.values[n].is_integer() for n in ints if n in first.values)
        else:
            fell_back += 1
            warm += start is not None
            assert (first.objective, first.values, first.gap) == (plain.objective, plain.values, plain.gap)
    assert took > 10 and fell_back > 5 and warm > 2  # every way is exercised


def test_a_solve_lists_the_variables_once_and_leaves_the_problem_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    """PuLP walks every constraint for ``variables()``; a solve asks for them four or five times,
    so ``solve`` takes the list once. Afterwards the problem lists its variables as PuLP does."""
    prob, best = _knapsack(7)
    calls = []
    listed = pulp.LpProblem.variables

    def counted(self: pulp.LpProblem) -> list[pulp.LpVariable]:
        calls.append(1)
        return listed(self)

    monkeypatch.setattr(pulp.LpProblem, "variables", counted)
    res = solve(prob, 30)
    assert res.status == OPTIMAL and res.objective == pytest.approx(best)
    assert len(calls) == 1
    assert "variables" not in vars(prob)
    assert [v.name for v in prob.variables()] == sorted(f"x_{i}" for i in range(14))
    assert len(calls) == 2
    assert set(res.values) == {v.name for v in prob.variables()}


@pytest.mark.parametrize("seed", [1, 2, 4])
def test_a_relaxation_without_presolve_leaves_the_search_presolving(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``relaxation_presolve=False`` (the quote's choose-one model): the relaxation runs without
    presolve, and where it is not whole the search runs with presolve as configured, to the answer
    the plain search gives."""
    import optimizer.ilp.solve as solve_mod

    made = _solver_spy(monkeypatch)
    first = solve(_choose_cheapest([7.5, 3.25, 9.0, 4.0]), time_limit_s=10, relaxation_first=True,
                  relaxation_presolve=False)
    assert made[-1].relaxation_integral and first.objective == 3.25 and first.gap == 0.0
    assert solve_mod._THREAD_HIGHS.highs.getOptionValue("presolve")[1] == "off"  # the relaxation's
    prob, best = _knapsack(seed)
    plain = solve(prob, time_limit_s=10)
    prob2, _ = _knapsack(seed)
    fell_back = solve(prob2, time_limit_s=10, relaxation_first=True, relaxation_presolve=False)
    assert not made[-1].relaxation_integral
    assert solve_mod._THREAD_HIGHS.highs.getOptionValue("presolve")[1] == "choose"  # the search's
    assert (fell_back.status, fell_back.objective, fell_back.values, fell_back.gap) == (
        plain.status, plain.objective, plain.values, plain.gap)
    assert fell_back.objective == pytest.approx(best)
