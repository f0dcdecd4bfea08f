"""Which offers the index sets aside, and that each kind of constraint still sees what it needs."""

from __future__ import annotations

import pytest

from optimizer.candidates.offer_groups import DOMINATED, OfferIndex, clear_indexes, index_for
from optimizer.candidates.rejections import EXCLUDED, NO_PRICE
from optimizer.estimator.workload import Constraints
from optimizer.offer import Offer
from optimizer.quote import quote
from tests.unit.decide_fakes import WORKLOAD, FakeEstimator, offer, shardings


def kept(offers: list[Offer], c: Constraints | None = None) -> list[str]:
    return [o.instance_type for o in OfferIndex.build(offers).view(c).offers]


def best_type(offers: list[Offer], c: Constraints, est: FakeEstimator) -> str | None:
    q = quote(WORKLOAD, c, offers, [], prices_as_of={}, snapshot_id="t", estimator=est, shardings=shardings)
    return q.best.instance_type if q.best else None


def test_dearer_offer_with_no_more_host_is_set_aside() -> None:
    offers = [offer("big", "A100", 1, 2.0, ram_gb=64, vcpus=8), offer("dear", "A100", 1, 3.0, ram_gb=64, vcpus=8)]
    v = OfferIndex.build(offers).view(Constraints())
    assert [o.instance_type for o in v.offers] == ["big"]
    assert [(g.reason, g.count, g.examples) for g in v.left_out] == [(DOMINATED, 1, ["aws/dear"])]


@pytest.mark.parametrize(
    ("cheap", "dear"),
    [
        ({"ram_gb": 8}, {"ram_gb": 64}),  # more RAM
        ({"vcpus": 2}, {"vcpus": 16}),  # more vCPUs
        ({"increment_s": 3600}, {"increment_s": 1}),  # another billing rule
        ({"vram_gb": 40}, {"vram_gb": 80}),  # another card size
        ({"provider": "gcp"}, {"provider": "aws"}),  # another provider (quotas, storage, books)
    ],
)
def test_dearer_offer_that_differs_in_what_matters_is_kept(cheap: dict, dear: dict) -> None:  # type: ignore[type-arg]
    offers = [offer("cheap", "A100", 1, 1.0, **cheap), offer("dear", "A100", 1, 3.0, **dear)]
    assert kept(offers) == ["cheap", "dear"]


def test_host_need_reaches_the_bigger_host() -> None:
    offers = [offer("small", "A100", 1, 1.0, ram_gb=8), offer("large", "A100", 1, 3.0, ram_gb=64)]
    est = FakeEstimator(ram_gb=32)
    view = OfferIndex.build(offers).view(Constraints(include_local=False)).offers
    assert best_type(view, Constraints(include_local=False), est) == "large" == best_type(
        offers, Constraints(include_local=False), est)


def test_spot_price_counts_only_when_spot_is_allowed() -> None:
    offers = [offer("a", "A100", 1, 2.0), offer("b", "A100", 1, 3.0, spot=0.5)]
    assert kept(offers) == ["a"]
    assert kept(offers, Constraints(allow_spot=True)) == ["a", "b"]
    est = FakeEstimator()
    c = Constraints(allow_spot=True, include_local=False)
    assert best_type(kept_offers(offers, c), c, est) == "b" == best_type(offers, c, est)


def kept_offers(offers: list[Offer], c: Constraints) -> list[Offer]:
    return OfferIndex.build(offers).view(c).offers


def test_regions_use_their_own_frontier() -> None:
    offers = [offer("x", "A100", 1, 1.0, region="us-east-1"), offer("x", "A100", 1, 2.0, region="eu-west-1")]
    assert [o.region for o in kept_offers(offers, Constraints())] == ["us-east-1"]
    view = OfferIndex.build(offers).view(Constraints(regions=["eu-west-1"]))
    assert [o.region for o in view.offers] == ["eu-west-1"]
    assert [(g.reason, g.count) for g in view.left_out] == [(EXCLUDED, 1)]


def test_filters_and_missing_prices_are_counted() -> None:
    offers = [offer("a", "A100", 1, None), offer("b", "H100", 1, 5.0, provider="gcp"), offer("c", "T4", 1, 0.5)]
    view = OfferIndex.build(offers).view(Constraints(providers=["aws"]))
    assert [o.instance_type for o in view.offers] == ["c"]
    assert {g.reason: g.count for g in view.left_out} == {NO_PRICE: 1, EXCLUDED: 1}
    assert view.skipped + len(view.offers) == view.total == 3


def test_equal_offers_keep_the_first_in_catalog_order() -> None:
    offers = [offer("x", "A100", 1, 1.0, zone="b"), offer("x", "A100", 1, 1.0, zone="a")]
    assert [o.zone for o in kept_offers(offers, Constraints())] == ["b"]


def test_index_is_built_once_per_snapshot_and_bounded() -> None:
    clear_indexes()
    loads: list[str] = []

    def load(tag: str):  # type: ignore[no-untyped-def]
        def f() -> list[Offer]:
            loads.append(tag)
            return [offer("x", "A100", 1, 1.0)]
        return f

    a = index_for("s1", load("s1"))
    assert index_for("s1", load("s1")) is a
    for i in range(10):
        index_for(f"other{i}", load("o"))
    assert index_for("s1", load("s1")) is not a
    assert loads.count("s1") == 2
    clear_indexes()


def test_prepared_index_answers_every_view_as_the_full_one_and_survives_pickling() -> None:
    import pickle

    from optimizer.price_warnings import usual_levels
    from pricing.snapshot.loader import load_bundled

    full = OfferIndex.build(load_bundled().offers)
    small = pickle.loads(pickle.dumps(full.prepared()))
    assert len(small.offers) < len(full.offers) and len(small) == len(full)
    some = sorted({o.region for o in full.offers})[:: max(1, len(full.offers) // 2000)][:6]
    cases = [
        Constraints(), Constraints(allow_spot=True), Constraints(regions=some),
        Constraints(regions=some[:1], allow_spot=True), Constraints(providers=["aws", "gcp"], gpus=["A100"]),
        Constraints(providers=["vast"], allow_spot=True), Constraints(gpus=["RTX4090", "H100"], regions=some),
    ]
    for c in cases:
        a, b = full.view(c), small.view(c)
        assert [o.model_dump() for o in a.offers] == [o.model_dump() for o in b.offers], c
        assert a.left_out == b.left_out and a.total == b.total, c
        wanted = {(o.provider, o.gpu) for o in a.offers}
        assert usual_levels(b.catalog, wanted) == usual_levels(list(full.offers), wanted)


def test_index_prepared_without_regions_falls_back_for_views_that_name_them() -> None:
    import pickle

    from pricing.snapshot.loader import load_bundled

    full = OfferIndex.build(load_bundled().offers)
    small = pickle.loads(pickle.dumps(full.prepared(regions=False)))
    assert len(small.offers) < len(full.prepared().offers) // 2
    for c in (Constraints(), Constraints(allow_spot=True), Constraints(providers=["aws"], gpus=["A100"])):
        assert [o.model_dump() for o in small.view(c).offers] == [o.model_dump() for o in full.view(c).offers]
    named = Constraints(regions=[full.offers[0].region])
    with pytest.raises(LookupError):
        small.view(named)  # no frontier for it, and nowhere to get one
    asked: list[int] = []
    small.fall_back_to(lambda: asked.append(1) or full)  # type: ignore[func-returns-value]
    for _ in range(2):
        got, want = small.view(named), full.view(named)
        assert [o.model_dump() for o in got.offers] == [o.model_dump() for o in want.offers]
        assert got.left_out == want.left_out
    assert asked == [1]  # asked once
