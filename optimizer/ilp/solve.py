"""Solve a PuLP model with the best solver at hand and report what happened, honestly.

HiGHS through highspy runs in-process (no model file, no subprocess) and is preferred; CBC is the
fallback. PuLP 3.x bundles CBC as ``PULP_CBC_CMD``; PuLP 4 no longer bundles it, so CBC is used
only when PuLP reports it available. A time-limited solve that found an incumbent says so in
``status`` ("Feasible (time limit)") and reports its gap; it is never passed off as optimal.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import pulp

from optimizer.errors import SolverError

OPTIMAL = "Optimal"
TIME_LIMITED = "Feasible (time limit)"
INFEASIBLE = "Infeasible"


@dataclass(frozen=True, slots=True)
class SolveResult:
    status: str
    solver: str
    seconds: float
    objective: float | None
    time_limit_s: float
    gap: float | None = None
    values: dict[str, float] = field(default_factory=dict)
    gap_rel: float | None = None  # the tolerance asked for

    @property
    def has_solution(self) -> bool:
        return self.objective is not None

    def chosen(self, name: str) -> bool:
        """A binary variable read as chosen (solvers return 0.9999999 for 1)."""
        return self.values.get(name, 0.0) > 0.5

    def integer(self, name: str) -> int:
        return int(round(self.values.get(name, 0.0)))


@lru_cache(maxsize=1)
def _available() -> tuple[str, ...]:
    return tuple(pulp.listSolvers(onlyAvailable=True))


@lru_cache(maxsize=1)
def _highs_available() -> bool:
    return bool(pulp.HiGHS(msg=False).available())


def solver_name() -> str:
    # The preferred solver asked first: listing them all asks every solver PuLP knows (a CLI
    # quote's first solve spent about 2 ms there).
    if _highs_available():
        return "HiGHS"
    avail = _available()
    if "HiGHS" in avail:
        return "HiGHS"
    if "PULP_CBC_CMD" in avail:
        return "CBC"
    if "HiGHS_CMD" in avail:
        return "HiGHS_CMD"
    raise SolverError("Unavailable", "no MILP solver: install highspy (pip install highspy)")


_banner_lock = threading.Lock()
_banner_done = False


def _swallow_highs_banner() -> None:
    """HiGHS prints a copyright banner from C++ the first time a ``Highs`` object is made in a
    process, whatever ``output_flag`` says; that would break ``--json`` (one document on stdout).
    Make that first object with file descriptor 1 pointed at /dev/null."""
    global _banner_done
    with _banner_lock:
        if _banner_done:
            return
        import highspy

        sys.stdout.flush()
        saved = os.dup(1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, 1)
            highspy.Highs()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            os.close(devnull)
        _banner_done = True


# HiGHS spends 5 % of its MIP effort on primal heuristics by default. The portfolio models find
# good purchase plans sooner with more: bench/solve_scaling.py plans of 10 / 50 / 100 jobs x 12
# months went from 5.2 / 10.5 / 15.1 s to 4.5 / 6.6 / 14.9 s at 0.3, same objectives.
HIGHS_HEURISTIC_EFFORT = 0.3


# One HiGHS instance per thread, cleared before each solve: making one (``highspy.Highs()``, with
# its callback objects) took 60-90 us, a tenth of a restricted quote's own time, and ``clear`` takes
# 2 us. Cleared, it holds no model, solution, basis or option but the defaults, as a new one.
_THREAD_HIGHS = threading.local()


def _cleared_highs() -> Any:
    import highspy

    h = getattr(_THREAD_HIGHS, "highs", None)
    if h is None:
        h = _THREAD_HIGHS.highs = highspy.Highs()
    else:
        h.clear()
    return h


class _BulkHiGHS(pulp.HiGHS):  # type: ignore[misc, name-defined]
    """In-process HiGHS given the model in a few array calls. PuLP's own ``buildSolverModel`` makes
    two calls into HiGHS per variable and one per constraint: 0.2 ms of a quote's 40-candidate
    model, and most of building a plan's thousands of variables. Same columns, bounds, costs,
    integrality and rows, in the same order (``tests/unit/test_solve.py`` holds the two to the same
    HiGHS model). The HiGHS instance is this thread's, cleared (``_cleared_highs``); ``solve`` reads
    what it needs of it before returning and then lets the problem go of it.

    ``start``: values by variable name the integer search starts from (a warm start).
    ``relaxation_first``: solve the LP relaxation first and stop there when its optimum is already
    integral, which makes it the integer optimum, proven (gap 0). HiGHS spent 18-24 ms on even a
    plan's small MIPs (presolve, probing, heuristics at the root); their relaxations take 2-3 ms,
    and most of them buy nothing or whole machines. ``relaxation_presolve`` False: that relaxation
    without presolve (a quote's choose-one model: 150 against 250 us for 40 candidates, scratch
    timing 2026-12-05; presolve off for the integer search itself took 2.2 ms), presolve set back
    as it was for a search that follows."""

    def __init__(self, *, start: Mapping[str, float] | None = None, relaxation_first: bool = False,
                 relaxation_presolve: bool = True, **kw: Any) -> None:
        super().__init__(**kw)
        # Values by name the integer search starts from (PuLP hands a start only to the HiGHS binary).
        self._warm = start
        self.relaxation_first = relaxation_first
        self.relaxation_presolve = relaxation_presolve
        self.relaxation_integral = False  # set by ``callSolver``: the relaxation's optimum was the answer
        self._ints: list[int] = []

    def createAndConfigureSolver(self, lp: pulp.LpProblem) -> None:  # PuLP's name
        # PuLP's own, on this thread's cleared instance rather than a new one.
        h = lp.solverModel = _cleared_highs()
        if self.callbackTuple:
            h.setCallback(*self.callbackTuple)
        for cb_type in self.callbacksToActivate or ():
            h.startCallback(cb_type)
        if not self.msg:
            h.setOptionValue("output_flag", False)
        if self.gapRel is not None:
            h.setOptionValue("mip_rel_gap", self.gapRel)
        if self.gapAbs is not None:
            h.setOptionValue("mip_abs_gap", self.gapAbs)
        if self.threads is not None:
            h.setOptionValue("threads", self.threads)
        if self.timeLimit is not None:
            h.setOptionValue("time_limit", float(self.timeLimit))
        for key, value in self.optionsDict.items():
            h.setOptionValue(key, value)

    def buildSolverModel(self, lp: pulp.LpProblem) -> None:  # PuLP's name
        import highspy
        import numpy as np

        inf = highspy.kHighsInf
        h = lp.solverModel
        sense = -1.0 if lp.sense == pulp.const.LpMaximize else 1.0
        variables = lp.variables()
        objective = lp.objective
        for i, var in enumerate(variables):
            var.index = i
        if variables:
            h.addCols(
                len(variables),
                np.array([sense * objective.get(v, 0.0) for v in variables], dtype=np.float64),
                np.array([-inf if v.lowBound is None else v.lowBound for v in variables], dtype=np.float64),
                np.array([inf if v.upBound is None else v.upBound for v in variables], dtype=np.float64),
                0, np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float64),
            )
            if self.mip:
                ints = self._ints = [v.index for v in variables if v.cat == pulp.const.LpInteger]
                if ints:
                    h.changeColsIntegrality(
                        len(ints), np.array(ints, dtype=np.int32),
                        np.full(len(ints), int(highspy.HighsVarType.kInteger), dtype=np.uint8),
                    )
        constraints = list(lp._constraints.values())
        if not constraints:
            return
        lower, upper, starts, index, value = [], [], [], [], []
        for i, c in enumerate(constraints):
            c.index = i
            lb, ub = c.getLb(), c.getUb()
            lower.append(-inf if lb is None else lb)
            upper.append(inf if ub is None else ub)
            starts.append(len(index))
            for var, coefficient in c.items():
                if coefficient != 0:
                    index.append(var.index)
                    value.append(coefficient)
        h.addRows(
            len(constraints), np.array(lower, dtype=np.float64), np.array(upper, dtype=np.float64), len(index),
            np.array(starts, dtype=np.int32), np.array(index, dtype=np.int32), np.array(value, dtype=np.float64),
        )

    def callSolver(self, lp: pulp.LpProblem) -> None:  # PuLP's name
        import highspy
        import numpy as np

        h = lp.solverModel
        # A HiGHS without the option answers kError: then the search runs as it always did.
        relax = self.relaxation_first and bool(self._ints)
        if relax and h.setOptionValue("solve_relaxation", True) == highspy.HighsStatus.kOk:
            if not self.relaxation_presolve:
                h.setOptionValue("presolve", "off")
            h.run()
            if _integral(h, self._ints):
                self.relaxation_integral = True
                return
            # Forget the relaxation's solution and basis: the search then runs exactly as it
            # would have without it (same path, same answer, same gap).
            h.clearSolver()
            h.setOptionValue("solve_relaxation", False)
            if not self.relaxation_presolve:
                h.setOptionValue("presolve", str(self.optionsDict.get("presolve", "choose")))
        if self._warm:
            pairs = [(v.index, self._warm[v.name]) for v in lp.variables() if v.name in self._warm]
            if pairs:
                idx, vals = zip(*pairs, strict=True)
                h.setSolution(len(idx), np.array(idx, dtype=np.int32), np.array(vals, dtype=np.float64))
        h.run()

    def findSolutionValues(self, lp: pulp.LpProblem) -> tuple[int, int]:  # PuLP's name
        status = super().findSolutionValues(lp)
        if self.relaxation_integral:
            # Integral within _INTEGRAL_TOL: the values an integer search reports, whole.
            for v in lp.variables():
                if v.cat == pulp.const.LpInteger:
                    v.varValue = float(round(v.varValue))
        return status  # type: ignore[no-any-return]


# How far from a whole number a relaxation's integer column may be and still count as whole: far
# below HiGHS's own MIP feasibility tolerance (1e-6), so nothing the search would reject is taken.
_INTEGRAL_TOL = 1e-9


def _integral(h: Any, ints: list[int]) -> bool:
    """The relaxation solved to optimality with every integer column whole."""
    import highspy
    import numpy as np

    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return False
    values = np.asarray(h.getSolution().col_value)[ints]
    return bool(np.all(np.abs(values - np.rint(values)) <= _INTEGRAL_TOL))


def _solver(
    name: str, time_limit_s: float, gap_rel: float | None = None, start: Mapping[str, float] | None = None,
    relaxation_first: bool = False, highs_options: Mapping[str, Any] | None = None,
    relaxation_presolve: bool = True,
) -> Any:
    if name == "HiGHS":
        _swallow_highs_banner()
        kw: dict[str, Any] = {
            "msg": False, "timeLimit": time_limit_s, "threads": 1, "gapRel": gap_rel,
            "mip_heuristic_effort": HIGHS_HEURISTIC_EFFORT, "relaxation_first": relaxation_first,
            "relaxation_presolve": relaxation_presolve, **(highs_options or {}),
        }
        return _BulkHiGHS(start=start, **kw)
    if name == "CBC":
        return pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit_s, gapRel=gap_rel)
    return pulp.HiGHS_CMD(msg=False, timeLimit=time_limit_s, gapRel=gap_rel)


def _gap(problem: pulp.LpProblem, name: str) -> float | None:
    model = getattr(problem, "solverModel", None)
    if name != "HiGHS" or model is None:
        return None
    try:
        gap = float(model.getInfo().mip_gap)
    except (AttributeError, TypeError, ValueError):
        return None
    # HiGHS reports inf for an LP or when no bound is known.
    return gap if gap == gap and gap != float("inf") else None


def _hit_time_limit(problem: pulp.LpProblem, name: str) -> bool:
    model = getattr(problem, "solverModel", None)
    if name != "HiGHS" or model is None:
        return False
    import highspy

    try:
        return bool(model.getModelStatus() == highspy.HighsModelStatus.kTimeLimit)
    except (AttributeError, TypeError):
        return False


@contextmanager
def _variables_listed_once(problem: pulp.LpProblem) -> Iterator[None]:
    """``problem.variables()`` answers with one list while the problem is solved.

    PuLP's ``variables()`` walks every term of the objective and of every constraint and sorts the
    lot by name each time it is called, and a solve calls it four or five times (building the
    solver's model, the warm start, reading the solution back twice, and ``solve`` for the
    values): about 4 % of a three-job plan's time. Nothing changes the model while it is solved,
    so the first list (taken after PuLP has fixed an empty objective) serves the rest.
    """
    listed: list[pulp.LpVariable] = []

    def variables() -> list[pulp.LpVariable]:
        if not listed:
            listed.extend(pulp.LpProblem.variables(problem))
        return listed

    problem.variables = variables  # type: ignore[method-assign]
    try:
        yield
    finally:
        del problem.variables


def solve(
    problem: pulp.LpProblem,
    time_limit_s: float = 10.0,
    solver: str | None = None,
    gap_rel: float | None = None,
    warm_start: Mapping[str, float] | None = None,
    relaxation_first: bool = False,
    highs_options: Mapping[str, Any] | None = None,
    relaxation_presolve: bool = True,
) -> SolveResult:
    """Solve ``problem`` within ``time_limit_s``; values of all variables come back by name.

    ``gap_rel`` is the relative optimality gap at which the search may stop (None: the solver's
    default, 1e-4 for HiGHS); "Optimal" then means optimal within that gap, and ``gap`` says how
    close the answer is. ``warm_start`` (values by variable name) is a feasible solution to start the
    search from (HiGHS in-process only; other solvers ignore it). ``relaxation_first``: try the LP
    relaxation first and take its optimum when it is integral (HiGHS in-process only; see
    ``_BulkHiGHS``); the answer is then optimal with gap 0. ``highs_options``: more HiGHS options for
    this solve (in-process HiGHS only). ``relaxation_presolve`` False: that relaxation without
    presolve (small models; the search after it, if any, presolves as configured).
    """
    name = solver or solver_name()
    start = time.perf_counter()
    used = _solver(name, time_limit_s, gap_rel, warm_start, relaxation_first, highs_options, relaxation_presolve)
    with _variables_listed_once(problem):
        problem.solve(used)
        seconds = time.perf_counter() - start
        values = {v.name: v.varValue for v in problem.variables() if v.varValue is not None}
    lp_status = pulp.LpStatus[problem.status]
    sol_status = getattr(problem, "sol_status", None)
    hit_limit = _hit_time_limit(problem, name) or seconds >= time_limit_s
    if sol_status == pulp.LpSolutionIntegerFeasible:
        # An incumbent without proof of optimality: stopped by the time limit (or another limit).
        status = TIME_LIMITED if hit_limit else "Feasible (stopped early)"
    elif lp_status == "Optimal" and sol_status in (None, pulp.LpSolutionOptimal):
        status = OPTIMAL
    elif lp_status == "Not Solved" and hit_limit:
        status = "Not Solved (time limit)"
    else:
        status = lp_status
    with_values = status in (OPTIMAL, TIME_LIMITED, "Feasible (stopped early)")
    objective = pulp.value(problem.objective) if with_values else None
    gap = 0.0 if getattr(used, "relaxation_integral", False) else _gap(problem, name)
    if status == OPTIMAL and gap is None:
        gap = 0.0
    if name == "HiGHS":
        # The instance is this thread's and the next solve clears it: the problem must not keep it.
        problem.solverModel = None
    return SolveResult(
        status=status,
        solver=name,
        seconds=seconds,
        objective=float(objective) if objective is not None else None,
        time_limit_s=time_limit_s,
        gap=gap,
        gap_rel=gap_rel,
        values=values if with_values else {},
    )
