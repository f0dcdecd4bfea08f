"""Quote-time price warnings: stale providers with their age, prices far from the provider's usual
level (spot included), converted currencies naming their rate."""

from __future__ import annotations

from datetime import UTC, datetime

from optimizer.offer import Offer
from optimizer.price_warnings import price_warnings, stale_warnings
from optimizer.results import Option

NOW = datetime(2026, 12, 1, tzinfo=UTC)
AS_OF = datetime(2025, 11, 30, tzinfo=UTC)


def _offer(instance: str, per_gpu: float, spot: float | None = None, *, provider: str = "aws", gpus: int = 8,
           region: str = "us-east-1", currency: str = "USD", source: str = "test") -> Offer:
    return Offer(provider=provider, region=region, instance_type=instance, gpu="A100", gpu_count=gpus,
                 gpu_vram_gb=40, price_hour=per_gpu * gpus, spot_price_hour=spot * gpus if spot else None,
                 currency=currency, price_hour_native=per_gpu * gpus, source=source, as_of=AS_OF)


def _option(offer: Offer, pricing: str = "on_demand") -> Option:
    price = offer.spot_price_hour if pricing == "spot" else offer.price_hour
    return Option(kind="cloud", provider=offer.provider, region=offer.region, instance_type=offer.instance_type,
                  gpu=offer.gpu, gpus_per_node=offer.gpu_count, nodes=1, pricing=pricing, hourly_usd=price,
                  hours=1.0, cost_usd=price, memory_need_gb_per_gpu=10, vram_gb_per_gpu=40, sharding="none")


MARKET = [_offer(f"t{i}", p) for i, p in enumerate((3.0, 3.2, 3.4, 3.6))]


def test_stale_providers_are_named_with_their_age() -> None:
    out = stale_warnings(["aws", "gcp", "aws"], {"aws": AS_OF, "gcp": NOW}, now=NOW, stale_after_days=1)
    assert out == [
        "stale prices: aws prices are 12 months old (as of 2025-11-30; stale after 1 days) - refresh them or "
        "check the provider's page"
    ]
    assert stale_warnings(["aws"], {"aws": AS_OF}, now=NOW, stale_after_days=400) == []


def test_spot_at_a_ninth_of_on_demand_is_implausible() -> None:
    cheap = _offer("p4d.24xlarge", 2.745, spot=0.308)
    out = price_warnings([_option(cheap, "spot")], [*MARKET, cheap], {}, now=NOW)
    assert len(out) == 1 and out[0].startswith("implausible price: aws/p4d.24xlarge spot")
    assert "1/10 of aws's usual on-demand A100 level" in out[0]
    # A spot price at 60% of on demand is an ordinary spot discount.
    usual = _offer("p4d.24xlarge", 3.3, spot=2.0)
    assert price_warnings([_option(usual, "spot")], [*MARKET, usual], {}, now=NOW) == []


def test_on_demand_far_from_the_providers_level_is_flagged_both_ways() -> None:
    dear, cheap, fine = _offer("x", 9.0), _offer("y", 1.0), _offer("z", 3.5)
    offers = [*MARKET, dear, cheap, fine]
    out = price_warnings([_option(dear), _option(cheap), _option(fine)], offers, {}, now=NOW)
    assert [w.split(" ")[2] for w in out] == ["aws/x", "aws/y"]


def test_spot_above_on_demand_is_flagged() -> None:
    odd = _offer("swapped", 3.3, spot=4.0)
    out = price_warnings([_option(odd, "spot")], [*MARKET, odd], {}, now=NOW)
    assert out and "above its on-demand" in out[0]


def test_converted_prices_name_their_rate() -> None:
    cny = _offer("ecs.gn7", 3.3, provider="alibaba", region="cn-shanghai", currency="CNY",
                 source="list price; USD at 0.140447 USD/CNY (rate of 2023-06-19)")
    out = price_warnings([_option(cny)], [cny], {}, now=NOW)
    assert out == ["converted price: alibaba/ecs.gn7 is priced in CNY; USD at 0.140447 USD/CNY (rate of 2023-06-19)"]


def test_no_level_no_verdict() -> None:
    # Fewer than three offers of a GPU at a provider: no usual level to compare against.
    lone = _offer("only", 0.1)
    assert price_warnings([_option(lone)], [lone], {}, now=NOW) == []


def test_a_shared_offer_list_gives_the_warnings_a_plain_list_gives() -> None:
    """On a shared ``OfferList`` the options' offers are looked up in an index kept per list
    (built once), not scanned for: the same warnings, in the same order, as on a plain list;
    one kept index per list, and another list gets its own."""
    from optimizer.candidates.offer_groups import OfferList
    from optimizer.price_warnings import _BY_TYPE

    dear, cheap, odd = _offer("x", 9.0), _offer("y", 1.0), _offer("swapped", 3.3, spot=4.0)
    cny = [_offer(f"ecs.gn{i}", 3.3, provider="alibaba", region="cn-shanghai", currency="CNY",
                  source=f"list price; USD at 0.14{i} USD/CNY (rate of 2023-06-1{i})") for i in range(3)]
    no_region = _offer("x", 9.0, region="")  # an offer without a region is never an option's row
    offers = [*MARKET, cny[2], dear, no_region, cheap, cny[0], odd, cny[1], dear]
    # Options in another order than the catalog's: notes follow the catalog.
    options = [_option(cny[1]), _option(odd, "spot"), _option(cheap), _option(cny[0]), _option(dear), _option(cny[2])]
    plain = price_warnings(options, offers, {}, now=NOW)
    # Implausible prices in the options' order, converted ones in the catalog's.
    assert [w.split(" ")[2] for w in plain] == ["aws/swapped", "aws/y", "aws/x", "alibaba/ecs.gn2", "alibaba/ecs.gn0",
                                                "alibaba/ecs.gn1"]
    shared = OfferList(offers)
    assert price_warnings(options, shared, {}, now=NOW) == plain
    entry = _BY_TYPE.get_or_compute(id(shared), lambda: (None, None))
    assert entry[0] is shared  # kept with its list
    assert price_warnings(options[:2], shared, {}, now=NOW) == price_warnings(options[:2], offers, {}, now=NOW)
    other = OfferList([*MARKET, cheap])
    assert price_warnings([_option(cheap)], other, {}, now=NOW) == price_warnings([_option(cheap)], [*MARKET, cheap],
                                                                                  {}, now=NOW)
