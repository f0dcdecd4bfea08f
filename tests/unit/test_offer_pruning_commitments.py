"""Pruning dominated offers keeps every commitment the full catalog would choose.

An offer that is dearer on demand with no larger host than another of its GPU and provider used to
be set aside, even when it held the cheaper reserved term: a plan on the served (pruned) view then
committed to the other offer at a higher rate than a plan on every offer. All prices here are
synthetic test values (``decide_fakes``); they make no claim about any provider's real prices.
"""

from __future__ import annotations

import pickle
from datetime import UTC, datetime

import pytest

from optimizer.candidates.commitment_cover import covers, terms_of
from optimizer.candidates.offer_groups import DOMINATED, OfferIndex
from optimizer.estimator.workload import Constraints
from optimizer.offer import Commitment, Offer
from optimizer.plan import PlanJobInput, PlanResult, plan
from tests.unit.decide_fakes import WORKLOAD, FakeEstimator, offer, shardings

AS_OF = datetime(2026, 11, 1, tzinfo=UTC)


def _term(months: float, rate: float, *, kind: str = "reserved", payment: str = "all_upfront") -> Commitment:
    return Commitment(kind=kind, term_months=months, payment=payment, effective_hourly_usd=rate,  # type: ignore[arg-type]
                      offering_class="standard" if kind == "reserved" else None, source="test: synthetic",
                      as_of=AS_OF)


def _with(o: Offer, *terms: Commitment) -> Offer:
    return o.model_copy(update={"commitments": list(terms)})


# Same GPU, count and provider: "od-cheap" is cheaper on demand with the larger host, so without
# commitments it sets "ri-cheap" aside; but "ri-cheap" holds the cheapest one-year term.
OD_CHEAP = _with(offer("od-cheap", "A10G", 1, 1.0, ram_gb=512, vcpus=96), _term(12, 0.8))
RI_CHEAP = _with(offer("ri-cheap", "A10G", 1, 1.2, ram_gb=256, vcpus=48), _term(12, 0.4), _term(36, 0.3))
CATALOG = [OD_CHEAP, RI_CHEAP]
# 60 runs of about 10 h a month: 600 h, so a term at 0.4/h (292 USD a month) beats on demand at
# 1.0/h (600 USD), and so does one at 0.8/h (584 USD), but at twice the cost.
JOBS = [PlanJobInput(name="busy", workload=WORKLOAD, runs_per_month=60)]


def _plan(offers: list[Offer]) -> PlanResult:
    return plan(JOBS, 12, Constraints(include_local=False), offers, [], estimator=FakeEstimator(),
                shardings=shardings, time_limit_s=20)


def _commits(p: PlanResult) -> list[tuple[str, float, str, int, float]]:
    return [(c.instance_type, c.term_months, c.payment, c.count, c.cost_usd) for c in p.commit]


def test_the_offer_holding_the_cheapest_term_is_kept() -> None:
    view = OfferIndex.build(CATALOG).view(Constraints())
    assert [o.instance_type for o in view.offers] == ["od-cheap", "ri-cheap"]
    assert view.left_out == []


def test_plan_on_the_served_view_commits_as_on_every_offer() -> None:
    full = _plan(CATALOG)
    served = _plan(OfferIndex.build(CATALOG).view(Constraints()).offers)
    # The full catalog commits one ri-cheap instance for a year at 0.4/h (8,760 h).
    assert _commits(full) == [("ri-cheap", 12, "all_upfront", 1, pytest.approx(0.4 * 8760, abs=0.01))]
    assert _commits(served) == _commits(full)
    assert served.total_cost_usd == pytest.approx(full.total_cost_usd)


def test_a_dominated_offer_is_still_set_aside_when_its_terms_are_covered() -> None:
    # The same instance in another zone, same terms: a duplicate, set aside as before.
    twin = RI_CHEAP.model_copy(update={"zone": "b"})
    # Dearer on demand, smaller host, and every term dearer: nothing of it can be chosen.
    dear = _with(offer("dear", "A10G", 1, 1.5, ram_gb=128, vcpus=16), _term(12, 0.5), _term(36, 0.35))
    view = OfferIndex.build([*CATALOG, twin, dear]).view(Constraints())
    assert [o.instance_type for o in view.offers] == ["od-cheap", "ri-cheap"]
    assert [(g.reason, g.count, sorted(g.examples)) for g in view.left_out] == [(DOMINATED, 2, ["aws/dear", "aws/ri-cheap"])]


@pytest.mark.parametrize(
    "other",
    [
        # A term of a length the cheaper offer lacks.
        _with(offer("other", "A10G", 1, 1.5, ram_gb=128, vcpus=16), _term(12, 0.5), _term(6, 0.2)),
        # The same length but another payment option, or a capacity block of its own.
        _with(offer("other", "A10G", 1, 1.5, ram_gb=128, vcpus=16), _term(12, 0.9, payment="no_upfront")),
        _with(offer("other", "A10G", 1, 1.5, ram_gb=128, vcpus=16), _term(0.5, 0.9, kind="capacity_block")),
        # The same cheapest term but other lengths dearer: a plan taking the first of equal cheapest
        # terms would commit to either, so neither is set aside.
        _with(offer("other", "A10G", 1, 1.5, ram_gb=128, vcpus=16), _term(12, 0.4), _term(36, 0.25)),
    ],
)
def test_terms_the_cheaper_offer_does_not_cover_keep_an_offer(other: Offer) -> None:
    view = OfferIndex.build([RI_CHEAP, other]).view(Constraints())
    assert [o.instance_type for o in view.offers] == ["ri-cheap", "other"]


def test_terms_at_or_above_on_demand_are_not_worth_keeping() -> None:
    # Its only term costs more than its own on-demand price: no quote or plan would choose it.
    useless = _with(offer("useless", "A10G", 1, 1.5, ram_gb=128, vcpus=16), _term(12, 1.6))
    assert terms_of(useless) is None
    view = OfferIndex.build([OD_CHEAP, useless]).view(Constraints())
    assert [o.instance_type for o in view.offers] == ["od-cheap"]
    # A coverer's term must pay for the coverer too: 0.8 is no use on an offer at 0.7 on demand.
    cheap_od = _with(offer("cheap-od", "A10G", 1, 0.7, ram_gb=512, vcpus=96), _term(12, 0.8))
    held = _with(offer("held", "A10G", 1, 1.0, ram_gb=128, vcpus=16), _term(12, 0.8))
    assert not covers(terms_of(cheap_od), terms_of(held))
    assert [o.instance_type for o in OfferIndex.build([cheap_od, held]).view(Constraints()).offers] == ["cheap-od", "held"]


def test_prepared_snapshot_keeps_the_committed_offer() -> None:
    index = OfferIndex.build(CATALOG)
    for prepared in (index.prepared(regions=False), index.prepared()):
        stored = pickle.loads(pickle.dumps(prepared))
        view = stored.view(Constraints())
        assert [o.instance_type for o in view.offers] == ["od-cheap", "ri-cheap"]
        assert _commits(_plan(view.offers)) == _commits(_plan(CATALOG))
