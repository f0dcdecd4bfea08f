"""A kind of request asked again (the same workload but for its amount, the same view of the offers
and limits) reads its groups' kept configurations from its layout (``cloud._Layout``), moves them
together (``amounts.moved_groups``, then by the layout's plan) and puts the estimates they read
into the request's memo at once: the answers are those computed cold, amount after amount, and
moving groups together gives what moving each gives."""

from __future__ import annotations

from typing import Any

import pytest

from optimizer.candidates import cloud
from optimizer.candidates.amount_rows import BATCH_AFTER
from optimizer.candidates.amounts import KeptMoves, moved_groups
from optimizer.estimator.estimate import clear_cache
from optimizer.estimator.workload import Constraints, Workload
from optimizer.quote import quote
from tests.unit.plan_workloads import bundled, served_offers
from tests.unit.test_moved_configs import _groups, _key, _make, _read, _scaled

W = Workload(model="qwen2.5-1.5b", method="lora", tokens=3e8)
# Back to an amount asked before (its entries then hold it), and across one-hour runs and the
# dataset-cache cap (the figures that are not multiples of the amount).
FACTORS = (1.0, 13.0, 1.0, 0.07, 250.0)
CONSTRAINTS = [Constraints(), Constraints(allow_spot=True, deadline_hours=30.0),
               Constraints(providers=["aws", "lambda"], max_gpus=8)]


def _quote(w: Workload, c: Constraints, quotas: dict[str, int] | None = None) -> dict[str, Any]:
    _, builds = bundled()
    q = quote(w, c, served_offers(c), builds, prices_as_of={}, snapshot_id="t", runs=2, quotas=quotas)
    return q.model_dump(exclude={"solver": {"seconds"}})


def _cold(w: Workload, c: Constraints, quotas: dict[str, int] | None = None) -> dict[str, Any]:
    clear_cache()
    return _quote(w, c, quotas)


def _layouts() -> list[Any]:
    return list(cloud._LAYOUTS._data.values())


@pytest.mark.parametrize("c", CONSTRAINTS, ids=["open", "spot-deadline", "restricted"])
def test_a_kind_of_request_asked_again_is_answered_from_its_layout_as_cold(c: Constraints) -> None:
    amounts = [_scaled(W, f) for f in FACTORS]
    cold = [_cold(w, c) for w in amounts]
    clear_cache()
    after = [_quote(amounts[0], c)]
    first = _layouts()
    assert len(first) == 1
    for w in amounts[1:]:
        after.append(_quote(w, c))
        assert _layouts() == first  # the same layout object, read again
    assert after == cold
    assert cold[1]["best"]["hours"] != cold[0]["best"]["hours"]
    assert cold[0]["estimate"]["estimator_calls"] > 0  # the estimates read, as cold


@pytest.mark.python_only  # counts the calls of the Python functions
def test_a_request_with_a_layout_looks_no_group_up_on_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_cache()
    laid_out: list[int] = []
    real = cloud._lay_out
    monkeypatch.setattr(cloud, "_lay_out", lambda *a: laid_out.append(1) or real(*a))
    kept: list[int] = []
    real_kept = cloud._kept
    monkeypatch.setattr(cloud, "_kept", lambda *a: kept.append(1) or real_kept(*a))
    for f in FACTORS:
        _quote(_scaled(W, f), Constraints())
    assert laid_out == [1]
    assert kept == []


@pytest.mark.python_only  # counts the calls of the Python functions
def test_a_sweep_of_token_counts_over_eighteen_jobs_lays_each_job_out_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A planning script's sweep: every job again with another token count, in turn (as
    ``bench/token_sweep.py`` and ``bench/load.py`` ask 6 models x 3 methods). The memo holds more
    layouts than that, so the second round lays nothing out again (16 held fewer: every job of a
    round-robin sweep was laid out anew)."""
    clear_cache()
    laid_out: list[int] = []
    real = cloud._lay_out
    monkeypatch.setattr(cloud, "_lay_out", lambda *a: laid_out.append(1) or real(*a))
    jobs = [(m, method) for m in ("gpt2", "qwen2.5-0.5b", "qwen2.5-1.5b", "llama-3-8b", "mistral-7b", "bert-base")
            for method in ("full", "lora", "qlora")]
    c = Constraints(providers=["aws", "lambda"], max_gpus=8)
    for sweep in range(2):
        for m, method in jobs:
            _quote(Workload(model=m, method=method, tokens=1e8 + 1e6 * sweep), c)
        assert len(laid_out) == len(jobs)


def test_quotas_give_a_layout_of_their_own() -> None:
    c = Constraints()
    quotas = {"aws": 8, "gcp": 0}
    cold = [_cold(w, c, quotas) for w in (W, _scaled(W, 5.0))]
    plain = _cold(_scaled(W, 5.0), c)
    clear_cache()
    _quote(W, c)  # the same request without quotas first
    assert [_quote(w, c, quotas) for w in (W, _scaled(W, 5.0))] == cold
    assert _quote(_scaled(W, 5.0), c) == plain
    assert cold[1] != plain


def test_configurations_that_do_not_move_are_made_for_each_amount(monkeypatch: pytest.MonkeyPatch) -> None:
    c = Constraints()
    amounts = [_scaled(W, f) for f in (1.0, 6.0, 0.2)]
    cold = [_cold(w, c) for w in amounts]
    monkeypatch.setattr(KeptMoves, "_prepare", lambda self: None)
    moved: list[Any] = []
    real_at = KeptMoves.at
    monkeypatch.setattr(KeptMoves, "at", lambda self, *a: moved.append(real_at(self, *a)) or moved[-1])
    clear_cache()
    assert [_quote(w, c) for w in amounts] == cold
    layout, = _layouts()
    live = sum(e is not None for e in layout.entries)
    # Laid out at the first amount; at each other, every entry refused to move, so was made anew.
    assert live > BATCH_AFTER
    assert len(moved) == 2 * live and all(m is None for m in moved)


def test_a_layouts_plan_moves_its_groups_as_each_would_move(monkeypatch: pytest.MonkeyPatch) -> None:
    c = Constraints()
    amounts = [_scaled(W, f) for f in (1.0, 3.0, 0.5, 40.0, 0.02)]
    cold = [_cold(w, c) for w in amounts]
    clear_cache()
    calls: list[int] = []
    real_at = KeptMoves.at
    monkeypatch.setattr(KeptMoves, "at", lambda self, *a: calls.append(1) or real_at(self, *a))
    got = [_quote(amounts[0], c), _quote(amounts[1], c)]
    layout, = _layouts()
    # The second amount moved each group on its own and found the rows each group's own: planned.
    assert layout.plan is not None and len(calls) > BATCH_AFTER
    calls.clear()
    got.append(_quote(amounts[2], c))
    assert calls == []  # every group moved by the plan
    # Another kind of request on the same workload (per-provider quotas) adds groups to its rows,
    # which are built again: the plan no longer holds and is made anew.
    _quote(amounts[3], c, {"aws": 8})
    plan = layout.plan
    got.append(_quote(amounts[3], c))
    assert calls and layout.plan is not plan and layout.plan is not None
    got.append(_quote(amounts[4], c))
    assert got == cold
    # Configuration by configuration, groups of several moving ones included.
    kept = [e for e in layout.entries if e is not None]
    assert max(len(e[3].row_plan(layout.plan.columns)[0]) for e in kept) > 1
    for factor in (7.0, 0.003):
        other = _scaled(W, factor)
        planned = cloud._planned(layout.plan, kept, other)
        each = [e[3].at(other) for e in kept]
        assert [[_read(x) for x in cfgs] for cfgs in planned] == [[_read(x) for x in cfgs] for cfgs in each]


def test_moving_groups_together_gives_what_moving_each_gives() -> None:
    groups = _groups()
    clear_cache()
    movers = [cloud._CONFIGS.get_or_compute(_key(W, g, None), lambda g=g: _entry(W, g))[3] for g in groups]
    assert len(movers) > BATCH_AFTER
    for factor in (3.0, 0.01, 400.0):
        other = _scaled(W, factor)
        together = moved_groups(movers, other)
        # Every group that moves took its figures from the rows moved for all (and found them its own).
        assert all(m._trusted for m in movers if m._bases)
        each = [m.at(other) for m in movers]
        assert [[_read(c) for c in cfgs] for cfgs in together] == [[_read(c) for c in cfgs] for cfgs in each]
        clear_cache()
        cold = [_make(other, g, None)({}) for g in groups]
        assert [[_read(c) for c in cfgs] for cfgs in together] == [[_read(c) for c in cfgs] for cfgs in cold]
        movers = [cloud._CONFIGS.get_or_compute(_key(W, g, None), lambda g=g: _entry(W, g))[3] for g in groups]


def _entry(w: Workload, g: Any) -> Any:
    return cloud._kept_entry(_make(w, g, None), w, g.gpus_per_node, None)
