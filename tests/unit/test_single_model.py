"""The single-job model (``optimizer.ilp.single``) is built from (variable, coefficient) pairs for
speed: it is, term for term, the model written with ``lpSum`` of products as its docstring states
it, with every side constraint (deadline, budget, quotas), and it solves to the cheapest pick."""

from __future__ import annotations

import random

import pulp
import pytest

from optimizer.candidates import Candidate
from optimizer.ilp.single import _safe, build_single
from optimizer.ilp.solve import solve
from tests.unit.test_solve import _solver_spy


def _candidates(seed: int, n: int) -> list[Candidate]:
    rng = random.Random(seed)
    return [
        Candidate(
            key=f"c{i}", kind="cloud", provider=rng.choice(["aws", "gcp", "lambda"]), region="r", zone=None,
            instance_type=f"t{i}", gpu="A100", gpus_per_node=8.0, nodes=1, pricing="on_demand",
            hourly_usd=rng.uniform(1, 40), hours=rng.uniform(0.5, 300), fixed_usd=rng.choice([0.0, rng.uniform(0, 900)]),
            cost_per_run_usd=rng.uniform(0, 5000), runs=rng.randint(1, 4), memory_need_gb_per_gpu=20.0,
            vram_gb_per_gpu=80.0, sharding="ddp", breakdown={}, total_gpus=float(rng.choice([1, 2, 8, 16])),
            lead_hours=rng.choice([0.0, 48.0]),
        )
        for i in range(n)
    ]


def _as_written(cands: list[Candidate], deadline: float | None, budget: float | None,
                quotas: dict[str, int] | None) -> pulp.LpProblem:
    """The model exactly as the module's docstring writes it, with lpSum."""
    problem = pulp.LpProblem("single_job", pulp.LpMinimize)
    xs = [pulp.LpVariable(f"x_{i}", cat=pulp.LpBinary) for i in range(len(cands))]
    problem += pulp.lpSum(c.cost_usd * x for c, x in zip(cands, xs, strict=True)), "total_cost_usd"
    problem += pulp.lpSum(xs) == 1, "choose_one"
    if deadline is not None:
        problem += pulp.lpSum((c.hours + c.lead_hours) * x for c, x in zip(cands, xs, strict=True)) <= deadline, "deadline"
    if budget is not None:
        problem += pulp.lpSum(c.cost_usd * x for c, x in zip(cands, xs, strict=True)) <= budget, "budget"
    for p, q in (quotas or {}).items():
        members = [(c, x) for c, x in zip(cands, xs, strict=True) if c.provider == p]
        if members:
            problem += pulp.lpSum(c.total_gpus * x for c, x in members) <= q, f"quota_{_safe(p)}"
    return problem


@pytest.mark.parametrize("seed", range(12))
def test_the_model_is_the_one_its_docstring_writes(seed: int) -> None:
    rng = random.Random(1000 + seed)
    cands = _candidates(seed, rng.randint(1, 40))
    deadline = rng.choice([None, rng.uniform(1, 400)])
    budget = rng.choice([None, rng.uniform(100, 20000)])
    quotas = rng.choice([None, {"aws": rng.choice([0, 8, 16]), "azure": 4}])
    built = build_single(cands, deadline_hours=deadline, budget_usd=budget, quotas=quotas).problem
    assert built.toDict() == _as_written(cands, deadline, budget, quotas).toDict()


def test_it_solves_to_the_cheapest_candidate_within_the_deadline() -> None:
    cands = _candidates(7, 30)
    deadline = sorted(c.hours + c.lead_hours for c in cands)[10]
    model = build_single(cands, deadline_hours=deadline)
    result = solve(model.problem, time_limit_s=10)
    picked = model.picked(result.values)
    on_time = [c for c in cands if c.hours + c.lead_hours <= deadline]
    assert picked is not None and picked.cost_usd == min(c.cost_usd for c in on_time)


def test_the_quotes_way_relaxation_first_without_presolve_gives_the_searchs_answer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``quote`` solves the model as its LP relaxation first, without presolve, and searches only
    where that is not whole: on random models with every kind of side row, the same status and
    cost as the plain search, one candidate picked, both ways exercised."""
    made = _solver_spy(monkeypatch)
    rng = random.Random(5)
    whole = searched = 0
    for seed in range(150):
        cands = _candidates(seed, rng.randint(1, 40))
        deadline = rng.choice([None, rng.uniform(1, 400)])
        budget = rng.choice([None, rng.uniform(100, 20000)])
        quotas = rng.choice([None, {"aws": rng.choice([0, 8, 16]), "gcp": rng.choice([1, 8])}])
        plain = solve(build_single(cands, deadline_hours=deadline, budget_usd=budget, quotas=quotas).problem,
                      time_limit_s=10)
        model = build_single(cands, deadline_hours=deadline, budget_usd=budget, quotas=quotas)
        first = solve(model.problem, time_limit_s=10, relaxation_first=True, relaxation_presolve=False)
        assert first.status == plain.status
        if not first.has_solution:
            continue
        assert first.objective == pytest.approx(plain.objective, rel=1e-9)
        assert sum(first.values.values()) == 1.0 and all(v in (0.0, 1.0) for v in first.values.values())
        picked = model.picked(first.values)
        assert picked is not None and picked.cost_usd == pytest.approx(plain.objective, rel=1e-9)
        if made[-1].relaxation_integral:
            whole += 1
        else:
            searched += 1
    assert whole > 50 and searched > 3  # both ways exercised
