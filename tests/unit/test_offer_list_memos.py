"""What is kept per shared offer list (``offer_groups.OfferList``): the groups a filter makes
(``candidates.cloud._filter_offers``), the vCPUs per instance (``quotas.vcpus_lookup``) and the
offers with commitments by key (``commitments.offers_by_key``). A
quote on a view asked for before is the same as one computed with nothing kept; lists that are
not an ``OfferList`` are computed each time; an ``OfferList`` cannot be changed in place."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime
from typing import Any

import pytest

from optimizer import commitments, quotas
from optimizer.candidates import cloud
from optimizer.candidates.offer_groups import OfferList
from optimizer.candidates.rejections import RejectionTally
from optimizer.estimator.workload import Constraints, Workload
from optimizer.price_warnings import price_screen
from optimizer.quote import quote
from tests.unit.plan_workloads import bundled, served_offers

CONSTRAINTS = [
    Constraints(),
    Constraints(allow_spot=True, providers=["aws", "gcp"]),
    Constraints(gpus=["A100"], regions=["us-east-1", "us-central1"]),
    Constraints(allow_suspect_prices=True, max_gpus=4),
]


def _quote(w: Workload, c: Constraints) -> dict[str, Any]:
    q = quote(w, c, served_offers(c), bundled()[1], prices_as_of={}, snapshot_id="t", runs=2)
    return q.model_dump(exclude={"solver": {"seconds"}})


@pytest.mark.parametrize("constraints", CONSTRAINTS)
def test_a_quote_on_a_view_asked_before_is_the_quote_computed_afresh(constraints: Constraints) -> None:
    w = Workload(model="qwen2.5-0.5b", method="lora", tokens=2e7)
    cloud._FILTERED.clear()
    quotas._VCPUS.clear()
    commitments._INDEXES.clear()
    first = _quote(w, constraints)
    assert cloud._FILTERED and quotas._VCPUS  # kept: the view is an OfferList
    assert commitments._INDEXES  # every quote reads its options' commitments
    again = _quote(w.model_copy(update={"tokens": 3e7}), constraints)
    cloud._FILTERED.clear()
    quotas._VCPUS.clear()
    commitments._INDEXES.clear()
    afresh = _quote(w.model_copy(update={"tokens": 3e7}), constraints)
    assert again == afresh
    assert first["rejected"] == _quote(w, constraints)["rejected"]


def test_the_groups_are_kept_per_list_filters_and_screen() -> None:
    c = Constraints(allow_spot=True)
    view = served_offers(c)
    assert isinstance(view, OfferList)
    screen = price_screen(view, datetime.now(UTC))
    cloud._FILTERED.clear()
    t1, t2 = RejectionTally(), RejectionTally()
    g1 = cloud._filter_offers(view, c, t1, screen)
    g2 = cloud._filter_offers(view, c, t2, screen)
    assert g2 is g1 and t2 == t1  # the rejections are tallied again, in the same order
    assert cloud._filter_offers(view, Constraints(), RejectionTally(), screen) is not g1  # other filters
    assert cloud._filter_offers(view, c, RejectionTally(), None) is not g1  # no screen
    plain = list(view)  # a plain list may change between calls: grouped each time
    t3 = RejectionTally()
    g3 = cloud._filter_offers(plain, c, t3, screen)
    assert g3 is not g1 and g3.keys() == g1.keys() and t3 == t1
    assert {k: [o.instance_type for o in g.offers] for k, g in g3.items()} == {
        k: [o.instance_type for o in g.offers] for k, g in g1.items()}


def test_an_offer_list_cannot_be_changed_and_pickles_whole() -> None:
    view = served_offers(Constraints())
    with pytest.raises(TypeError):
        view.append(view[0])
    with pytest.raises(TypeError):
        view[0] = view[1]
    with pytest.raises(TypeError):
        view.sort(key=lambda o: o.price_hour or 0)
    back = pickle.loads(pickle.dumps(view))
    assert isinstance(back, OfferList) and list(back) == list(view)
    assert back.usual_levels_memo == view.usual_levels_memo
    lookup, plain = quotas.vcpus_lookup(view), quotas.vcpus_lookup(list(view))
    for o in view[:50]:
        assert lookup(o.provider, o.region, o.instance_type) == plain(o.provider, o.region, o.instance_type)


def test_a_groups_offer_tables_are_made_once_and_equal_fresh_ones() -> None:
    """What pricing reads of a group's offers alone (spot rates, billing rules, prices) is made
    once per group and spot flag, kept with the group, and equals tables made afresh."""
    c = Constraints(allow_spot=True)
    groups = cloud._filter_offers(served_offers(c), c, RejectionTally())
    spot_priced = 0
    for g in groups.values():
        for spot in (False, True):
            kept = g.offer_tables(spot)
            assert g.offer_tables(spot) is kept
            assert kept == cloud._offer_tables(g.offers, spot)
            spot_priced += sum(len(rows) for (s, *_), rows in kept.priced.items() if s)
        assert not g.offer_tables(False).rates and not any(s for s, *_ in g.offer_tables(False).priced)
    assert spot_priced > 0  # the catalog has spot prices: the spot tables were compared on rows


def test_the_commitment_index_is_kept_per_list_and_equals_a_fresh_one() -> None:
    """``offers_by_key`` of an ``OfferList`` is made once per list; a plain list (which may change
    between calls) is indexed each time; both hold the same offers, every one with commitments."""
    view = served_offers(Constraints(allow_spot=True))
    commitments._INDEXES.clear()
    kept = commitments.offers_by_key(view)
    assert commitments.offers_by_key(view) is kept
    plain = list(view)
    fresh = commitments.offers_by_key(plain)
    assert fresh is not kept and commitments.offers_by_key(plain) is not fresh
    assert fresh == kept
    with_terms = [o for o in view if o.commitments]
    assert with_terms and len(kept) <= len(with_terms)
    assert all(o.commitments for o in kept.values())
    assert all(kept[(o.provider, o.region or "", o.zone or "", o.instance_type)] in with_terms for o in with_terms)
    other = served_offers(Constraints())  # another view: another list, another index
    assert other is not view and commitments.offers_by_key(other) is not kept


def test_a_plan_on_a_view_keeps_its_derived_tables_and_answers_as_on_a_plain_list() -> None:
    """``plan`` works on a snapshot's shared list as it is (it no longer copies it): the groups a
    filter makes and each offer's committed rate (``plan._committed_rates``) are kept per list and
    serve the next plan; the answer is the one a plain copy of the same offers gets, where
    nothing is kept."""
    from optimizer import plan as plan_module
    from optimizer.plan import PlanJobInput, plan

    c = Constraints(allow_spot=True)
    view = served_offers(c)
    builds = bundled()[1]
    jobs = [
        PlanJobInput(name="a", workload=Workload(model="qwen2.5-0.5b", method="lora", tokens=2e8), runs_per_month=4),
        PlanJobInput(name="b", workload=Workload(model="bert-base", method="full", tokens=1e8), runs_per_month=6),
    ]

    def dumped(offers: list[Any]) -> dict[str, Any]:
        p = plan(jobs, 12, c, offers, builds, prices_as_of={}, snapshot_id="t")
        return p.model_dump(exclude={"timing": True, "solver": {"seconds", "time_limit_s"}})

    cloud._FILTERED.clear()
    plan_module._COMMITTED_RATES.clear()
    kept = dumped(view)
    assert kept["rental_search"]["committable_offers_priced"] > 0  # the commitment search ran
    assert len(plan_module._COMMITTED_RATES) == 1 and len(cloud._FILTERED) >= 1
    (_, rates), = plan_module._COMMITTED_RATES._data.values()
    assert len(rates) == len(view) and any(r is not None for r in rates.values())
    filtered = dict(cloud._FILTERED._data)
    assert dumped(view) == kept  # a second plan reads what the first kept
    assert dict(cloud._FILTERED._data) == filtered and len(plan_module._COMMITTED_RATES) == 1
    cloud._FILTERED.clear()
    plan_module._COMMITTED_RATES.clear()
    assert dumped(list(view)) == kept
    assert not plan_module._COMMITTED_RATES  # a plain list's rates are worked out per plan


def test_committed_rates_are_each_offers_own() -> None:
    from optimizer.plan import _committed_rate, _committed_rates

    view = served_offers(Constraints())
    rate = _committed_rates(view)
    with_terms = [o for o in view if o.commitments]
    assert with_terms
    assert [rate(o) for o in view] == [_committed_rate(o) for o in view]
    assert any(rate(o) is not None for o in with_terms)
