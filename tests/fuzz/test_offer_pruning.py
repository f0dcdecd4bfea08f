"""Pruning dominated offers never changes the answer.

Random catalogs (several providers, regions, GPUs, counts, billing rules; prices, spot prices and
hosts drawn independently, with duplicates across zones and missing prices and hosts) and random
constraints (providers, regions, GPUs, spot, deadline, budget, max GPUs, quotas): the quote on the
pruned view of ``OfferIndex`` picks a best option of exactly the cost the quote on every offer
picks, is infeasible exactly when that one is, and still accounts for every offer.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optimizer.candidates.offer_groups import OfferIndex, merge_rejected
from optimizer.estimator.workload import Constraints
from optimizer.explain import rejected_groups
from optimizer.offer import Offer
from optimizer.quote import quote
from tests.unit.decide_fakes import WORKLOAD, FakeEstimator, offer, shardings

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PROVIDERS = ["aws", "gcp", "lambda"]
REGIONS = ["r1", "r2", "r3"]
GPUS = ["A10G", "A100", "H100"]


@st.composite
def catalogs(draw: st.DrawFn) -> list[Offer]:
    out: list[Offer] = []
    for i in range(draw(st.integers(1, 28))):
        gpu = draw(st.sampled_from(GPUS))
        count = draw(st.sampled_from([1, 1, 1, 8]))
        price = draw(st.one_of(st.none(), st.sampled_from([0.5, 1.0, 1.5, 3.0, 9.0, 30.0])))
        spot = draw(st.one_of(st.none(), st.sampled_from([0.2, 0.5, 1.0, 4.0])))
        if price is None and spot is None:
            price = 2.0
        o = offer(
            f"type-{i % 9}", gpu, count, None if price is None else price * count,
            provider=draw(st.sampled_from(PROVIDERS)), region=draw(st.sampled_from(REGIONS)),
            zone=draw(st.sampled_from([None, "a", "b"])),
            spot=None if spot is None else spot * count,
            ram_gb=draw(st.sampled_from([None, 8.0, 16.0, 64.0, 512.0])),
            vcpus=draw(st.sampled_from([None, 2.0, 4.0, 8.0, 96.0])),
            increment_s=draw(st.sampled_from([1, 1, 1, 3600])),
        )
        # Block-storage rates differ by provider: option generation must rank offers by compute
        # plus storage, whatever order they come in.
        o = o.model_copy(update={"storage_usd_per_gb_month": draw(st.sampled_from([None, 0.08, 0.1, 0.2]))})
        out.append(o)
        if draw(st.booleans()):
            # The same instance in another zone or region, sometimes at the same price.
            out.append(o.model_copy(update={"zone": "c", "region": draw(st.sampled_from(REGIONS))}))
    return out


@st.composite
def constraint_sets(draw: st.DrawFn) -> tuple[Constraints, dict[str, int] | None]:
    c = Constraints(
        providers=draw(st.one_of(st.none(), st.lists(st.sampled_from(PROVIDERS), min_size=1, max_size=2, unique=True))),
        regions=draw(st.one_of(st.none(), st.lists(st.sampled_from(REGIONS), min_size=1, max_size=2, unique=True))),
        gpus=draw(st.one_of(st.none(), st.lists(st.sampled_from(GPUS), min_size=1, max_size=2, unique=True))),
        allow_spot=draw(st.booleans()),
        deadline_hours=draw(st.one_of(st.none(), st.sampled_from([2.0, 6.0, 20.0, 100.0]))),
        budget_usd=draw(st.one_of(st.none(), st.sampled_from([5.0, 30.0, 300.0]))),
        max_gpus=draw(st.one_of(st.none(), st.sampled_from([1, 2, 8, 16]))),
        include_local=False,
    )
    quotas = draw(st.one_of(st.none(), st.dictionaries(st.sampled_from(PROVIDERS), st.sampled_from([1, 8]),
                                                       max_size=2)))
    return c, quotas or None


def _quote(offers: list[Offer], c: Constraints, quotas: dict[str, int] | None, est: FakeEstimator):  # type: ignore[no-untyped-def]
    return quote(WORKLOAD, c, offers, [], runs=2, prices_as_of={}, snapshot_id="t", estimator=est,
                 shardings=shardings, quotas=quotas)


@FUZZ
@given(offers=catalogs(), cq=constraint_sets(), ram=st.sampled_from([4.0, 12.0, 40.0]),
       cores=st.sampled_from([1, 4, 12]))
def test_pruned_quote_has_the_same_best(offers: list[Offer], cq: tuple[Constraints, dict[str, int] | None],
                                        ram: float, cores: int) -> None:
    c, quotas = cq
    est = FakeEstimator(ram_gb=ram, cores=cores)
    full = _quote(offers, c, quotas, est)
    view = OfferIndex.build(offers).view(c)
    pruned = _quote(view.offers, c, quotas, est)
    assert (full.best is None) == (pruned.best is None)
    if full.best is not None and pruned.best is not None:
        assert abs(full.best.cost_usd - pruned.best.cost_usd) <= 1e-9 * max(1.0, full.best.cost_usd)
    # Cheapest alternatives cost the same, row by row, as far as the pruned list goes.
    for a, b in zip(full.options, pruned.options, strict=False):
        assert b.cost_usd >= a.cost_usd - 1e-9
    assert len(view.offers) <= len(offers)
    # Every offer is still accounted for: rejected for a reason, set aside, or feasible.
    merged = merge_rejected(pruned.rejected, view.left_out)
    assert sum(g.count for g in merged) + pruned.estimate["feasible_offers"] == len(offers)
    assert sum(g.count for g in full.rejected) + full.estimate["feasible_offers"] == len(offers)


def test_rejected_groups_merge_by_reason() -> None:
    from optimizer.candidates.rejections import RejectionTally

    t = RejectionTally()
    t.add("no price", "aws/x", 2)
    merged = merge_rejected(rejected_groups(t), OfferIndex.build(
        [offer("a", "A100", 1, None, provider="gcp")]).view(Constraints()).left_out)
    assert [(g.reason, g.count) for g in merged] == [("no price", 3)]
    assert merged[0].examples == ["aws/x", "gcp/a"]
