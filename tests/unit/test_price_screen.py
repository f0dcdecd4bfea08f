"""Issue 19: suspect prices (far below the provider's usual level, or too old) are not planned on
by default, and never set a plausible offer aside in the pruned offer index."""

from __future__ import annotations

from datetime import UTC, datetime

from optimizer.candidates import generate
from optimizer.candidates.offer_groups import OfferIndex
from optimizer.estimator.workload import Constraints
from optimizer.price_warnings import SUSPECT_FAR, SUSPECT_OLD, SUSPECT_SPOT, price_screen
from optimizer.quote import quote
from tests.unit.decide_fakes import WORKLOAD, FakeEstimator, offer

NOW = datetime(2026, 12, 1, tzinfo=UTC)
MARKET = [offer(f"m{i}", "A100", 1, p, spot=p * 0.6) for i, p in enumerate((3.0, 3.2, 3.4, 3.6))]


def test_screen_reasons() -> None:
    cheap = offer("cheap", "A100", 1, 0.9)  # under a third of the 3.3 median
    low_spot = offer("lowspot", "A100", 1, 3.1, spot=0.3)  # under 15 % of it
    old = offer("old", "A100", 1, 3.2).model_copy(update={"as_of": datetime(2022, 1, 1, tzinfo=UTC)})
    fine = offer("fine", "A100", 1, 1.5, spot=1.0)  # cheap but within the bounds
    s = price_screen([*MARKET, cheap, low_spot, old, fine], NOW)
    assert s.reasons(cheap) == (SUSPECT_FAR, None)
    assert s.reasons(low_spot) == (None, SUSPECT_SPOT)
    assert s.reasons(old) == (SUSPECT_OLD, SUSPECT_OLD)
    assert s.reasons(fine) == (None, None)


def test_a_suspect_price_is_rejected_unless_allowed() -> None:
    cheap = offer("cheap", "A100", 1, 0.5)
    offers = [*MARKET, cheap]
    kw = {"prices_as_of": {}, "snapshot_id": "t", "estimator": FakeEstimator(), "now": NOW}
    q = quote(WORKLOAD, Constraints(include_local=False), offers, [], **kw)  # type: ignore[arg-type]
    assert q.best is not None and q.best.instance_type != "cheap"
    assert any(g.reason == SUSPECT_FAR and "aws/cheap" in g.examples for g in q.rejected)
    allowed = quote(WORKLOAD, Constraints(include_local=False, allow_suspect_prices=True), offers, [],
                    **kw)  # type: ignore[arg-type]
    assert allowed.best is not None and allowed.best.instance_type == "cheap"
    assert allowed.best.price_age_days is not None and allowed.best.price_age_days > 0


def test_the_index_never_prunes_a_plausible_offer_for_a_suspect_one() -> None:
    # Same group, more host and a far lower (suspect) price: unscreened it dominates "real".
    real = offer("real", "A100", 1, 2.9, ram_gb=600, vcpus=100)
    bogus = offer("bogus", "A100", 1, 0.3, ram_gb=1024, vcpus=128)
    idx = OfferIndex.build([*MARKET, real, bogus])
    screened = idx.view(Constraints())
    assert "real" in {o.instance_type for o in screened.offers}
    assert "bogus" not in {o.instance_type for o in screened.offers}
    assert any(g.reason == SUSPECT_FAR for g in screened.left_out)
    unscreened = idx.view(Constraints(allow_suspect_prices=True))
    assert "real" not in {o.instance_type for o in unscreened.offers}  # dominated by the bogus price
    cs = generate(WORKLOAD, Constraints(include_local=False), screened.offers, [], estimator=FakeEstimator())
    assert cs.ranked


def test_a_quote_on_the_pruned_view_screens_against_the_whole_catalog() -> None:
    # Shrunk from tests/fuzz/test_offer_pruning.py: "cheap" is on demand at a quarter of AWS's
    # usual A10G level (suspect), its spot price is plausible. The view keeps "cheap" and one of the
    # seven equal offers; medians over those two alone would call nothing suspect and let the
    # quote plan on the suspect on-demand price.
    same = [offer(f"t{i}", "A10G", 1, 2.0, ram_gb=None, vcpus=None) for i in range(1, 8)]
    cheap = offer("cheap", "A10G", 1, 0.5, spot=0.5, ram_gb=None, vcpus=None)
    offers = [cheap, *same]
    c = Constraints(include_local=False, allow_spot=True)
    kw = {"prices_as_of": {}, "snapshot_id": "t", "estimator": FakeEstimator(), "now": NOW}
    full = quote(WORKLOAD, c, offers, [], **kw)  # type: ignore[arg-type]
    view = OfferIndex.build(offers).view(c)
    assert len(view.offers) < len(offers)
    pruned = quote(WORKLOAD, c, view.offers, [], **kw)  # type: ignore[arg-type]
    assert full.best is not None and pruned.best is not None
    assert (full.best.instance_type, full.best.pricing) == ("cheap", "spot")
    assert (pruned.best.instance_type, pruned.best.pricing, pruned.best.cost_usd) == (
        full.best.instance_type, full.best.pricing, full.best.cost_usd)


def test_an_offer_whose_spot_price_alone_is_suspect_is_counted_once() -> None:
    # Its on-demand price is usual, its spot price under 15 % of the level: it runs on demand and
    # is feasible, not also rejected for the spot price (every offer counted exactly once).
    offers = [offer("a", "A10G", 1, 2.0), offer("lowspot", "A10G", 1, 1.0, spot=0.2), offer("b", "A10G", 1, 2.0)]
    q = quote(WORKLOAD, Constraints(include_local=False, allow_spot=True), offers, [], prices_as_of={},
              snapshot_id="t", estimator=FakeEstimator(), now=NOW)
    assert q.estimate["feasible_offers"] == 3
    assert sum(g.count for g in q.rejected) == 0
    assert all(o.pricing == "on_demand" for o in q.options if o.instance_type == "lowspot")
