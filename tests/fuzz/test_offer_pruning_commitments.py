"""Pruning dominated offers never loses a commitment the full catalog would choose.

Random catalogs of offers with reserved and savings-plan terms (lengths, payments and rates drawn
independently of the on-demand price, some above it; zone duplicates with the same terms): every
term that pays for an offer (below its on-demand price) is matched in the pruned view of
``OfferIndex`` by a kept offer of the same provider and GPU, no dearer on demand, with the same
term at no higher rate; and a team plan on the view costs what the plan on every offer costs.
All prices are synthetic.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optimizer.candidates.estimator import _canonical
from optimizer.candidates.offer_groups import OfferIndex
from optimizer.estimator.workload import Constraints
from optimizer.offer import Commitment, Offer
from optimizer.plan import PlanJobInput, plan
from tests.unit.decide_fakes import WORKLOAD, FakeEstimator, offer, shardings

AS_OF = datetime(2026, 11, 1, tzinfo=UTC)
PROVIDERS = ["aws", "azure"]
GPUS = ("A10G", "A100")
TERMS = [("reserved", "standard", 12.0), ("reserved", "standard", 36.0), ("savings_plan", "Compute", 12.0)]
PAYMENTS = ["all_upfront", "no_upfront"]


@st.composite
def catalogs(draw: st.DrawFn, gpus: tuple[str, ...] = GPUS, size: int = 10) -> list[Offer]:
    out: list[Offer] = []
    for i in range(draw(st.integers(1, size))):
        price = draw(st.sampled_from([0.8, 1.0, 1.2, 1.5]))
        terms = [
            Commitment(kind=kind, offering_class=klass, term_months=months, payment=payment,  # type: ignore[arg-type]
                       effective_hourly_usd=price * draw(st.sampled_from([0.3, 0.45, 0.6, 0.8, 1.1])),
                       source="test: synthetic", as_of=AS_OF)
            for kind, klass, months in TERMS for payment in PAYMENTS if draw(st.integers(0, 3)) == 0
        ]
        o = offer(
            f"type-{i}", draw(st.sampled_from(gpus)), 1, price, provider=draw(st.sampled_from(PROVIDERS)),
            ram_gb=draw(st.sampled_from([64.0, 128.0, 512.0])), vcpus=draw(st.sampled_from([8.0, 16.0, 96.0])),
        ).model_copy(update={"commitments": terms})
        out.append(o)
        if draw(st.booleans()):
            out.append(o.model_copy(update={"zone": "b"}))
    return out


def _useful(o: Offer) -> list[Commitment]:
    return [c for c in o.commitments if o.price_hour is None or c.effective_hourly_usd < o.price_hour]


def _key(c: Commitment) -> tuple[object, ...]:
    return (c.kind, c.offering_class, c.term_months, c.payment, c.starts_at)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(offers=catalogs(), spot=st.booleans())
def test_every_useful_term_survives_pruning(offers: list[Offer], spot: bool) -> None:
    c = Constraints(allow_spot=spot, allow_suspect_prices=True)
    kept = OfferIndex.build(offers).view(c).offers
    for a in offers:
        for term in _useful(a):
            assert any(
                b.provider == a.provider and _canonical(b.gpu) == _canonical(a.gpu) and b.gpu_count == a.gpu_count
                and (b.price_hour or 0) <= (a.price_hour or 0)
                and any(_key(t) == _key(term) and t.effective_hourly_usd <= term.effective_hourly_usd
                        for t in _useful(b))
                for b in kept
            ), (a.instance_type, term)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# One GPU and a few offers, busy enough months that committing pays: the plan meets the choice.
@given(offers=catalogs(gpus=("A10G",), size=5), runs=st.sampled_from([45, 70]))
def test_plan_on_the_pruned_view_costs_what_the_full_plan_costs(offers: list[Offer], runs: int) -> None:
    c = Constraints(include_local=False)
    jobs = [PlanJobInput(name="job", workload=WORKLOAD, runs_per_month=runs)]

    def cost(catalog: list[Offer]) -> tuple[float | None, list[tuple[float, str, float]]]:
        p = plan(jobs, 12, c, catalog, [], estimator=FakeEstimator(), shardings=shardings, time_limit_s=20)
        return p.total_cost_usd, sorted((x.term_months, x.payment, x.cost_usd) for x in p.commit)

    full, full_commits = cost(offers)
    pruned, pruned_commits = cost(OfferIndex.build(offers).view(c).offers)
    assert (full is None) == (pruned is None)
    if full is not None:
        assert pruned == pytest.approx(full, rel=1e-6)
        # What is committed costs the same (the instance may be another of equal terms).
        assert sum(x[2] for x in pruned_commits) == pytest.approx(sum(x[2] for x in full_commits), rel=1e-6)
