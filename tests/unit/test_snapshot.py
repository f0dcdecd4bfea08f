"""The bundled snapshot: every row sourced and dated, the coverage the product promises, and
reference prices that must survive curation unchanged (prices-notes.md, section 3)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from optimizer.estimator.gpus import find_gpu
from pricing.currency import fx_rate
from pricing.snapshot import load_bundled
from pricing.validate import validate_rows


@pytest.fixture(scope="module")
def snap():
    return load_bundled()


def test_every_offer_is_sourced_dated_canonical_and_priced(snap) -> None:
    assert snap.offers
    for o in snap.offers:
        assert o.source.strip(), o.key
        assert o.as_of.tzinfo is not None, o.key
        assert find_gpu(o.gpu) == o.gpu, o.key
        assert o.price_hour is not None and o.price_hour > 0, o.key
        assert o.price_hour_native is not None and o.price_hour_native > 0, o.key


def test_offer_keys_are_unique(snap) -> None:
    keys = [o.key for o in snap.offers]
    assert len(keys) == len(set(keys))


def test_aws_covers_every_family_in_us_east_1_and_three_regions(snap) -> None:
    aws = [o for o in snap.offers if o.provider == "aws"]
    assert len({o.region for o in aws}) >= 3
    east = {o.instance_type.split(".")[0] for o in aws if o.region == "us-east-1"}
    assert {"p3", "g4dn", "g5", "g6", "g6e", "p4d", "p4de", "p5"} <= east
    assert any(o.spot_price_hour for o in aws if o.region == "us-east-1")
    assert all(o.billing_increment_s == 1 and o.min_billing_s == 60 for o in aws)


def test_gcp_covers_the_machine_families_in_three_regions(snap) -> None:
    gcp = [o for o in snap.offers if o.provider == "gcp"]
    assert len({o.region for o in gcp}) >= 3
    types = {o.instance_type for o in gcp}
    for wanted in ("a2-highgpu-1g", "a2-highgpu-8g", "a2-ultragpu-1g", "a2-ultragpu-8g", "a3-highgpu-8g",
                   "g2-standard-4", "g2-standard-48"):
        assert wanted in types
    assert any(t.startswith("n1-") and t.endswith("T4") for t in types)
    assert any(t.startswith("n1-") and t.endswith("V100") for t in types)


def test_alibaba_keeps_cny_and_converts_at_the_dated_rate(snap) -> None:
    ali = [o for o in snap.offers if o.provider == "alibaba"]
    assert len({o.region for o in ali}) >= 2
    cny = [o for o in ali if o.currency == "CNY"]
    assert {o.instance_type.split("-")[0] for o in cny} >= {"ecs.gn6v", "ecs.gn7i", "ecs.gn7", "ecs.gn7e"}
    rate = fx_rate("CNY")
    for o in cny:
        assert o.price_hour == pytest.approx(o.price_hour_native * rate.rate_to_usd, rel=1e-5)
        assert rate.as_of.isoformat() in o.source


def test_autodl_rows_are_cny_per_gpu_hour(snap) -> None:
    autodl = [o for o in snap.offers if o.provider == "autodl"]
    assert {o.gpu for o in autodl} >= {"RTX3090", "RTX4090", "A100", "A100-80GB"}
    assert all(o.currency == "CNY" for o in autodl)
    ranged = [o for o in autodl if o.gpu == "RTX3090"]
    assert ranged[0].price_hour_native == pytest.approx(2.4)  # "2.0-2.8" -> midpoint
    assert "midpoint" in ranged[0].source


@pytest.mark.parametrize(
    ("provider", "region", "instance", "price"),
    [
        ("aws", "us-east-1", "p4d.24xlarge", 21.957642),
        ("aws", "us-east-1", "p5.48xlarge", 55.04),
        ("aws", "us-east-1", "g5.xlarge", 1.006),
        ("gcp", "us-central1", "a2-highgpu-1g", 3.67339),
        ("gcp", "us-central1", "g2-standard-4", 0.70683),
        ("gcp", "us-central1", "a3-highgpu-8g", 43.06615),
        ("lambda", "us-east-1", "gpu_8x_h100_sxm5", 31.92),
        ("nebius", "eu-north1", "gpu-h100-sxm_1gpu-16vcpu-200gb", 2.95),
    ],
)
def test_reference_prices_from_prices_notes(snap, provider, region, instance, price) -> None:
    [offer] = [o for o in snap.offers if (o.provider, o.region, o.instance_type) == (provider, region, instance)]
    assert offer.price_hour == pytest.approx(price, abs=1e-6)


def test_aws_rows_match_the_catalog_and_spot_is_the_cheapest_zone(snap, reference_dir: Path) -> None:
    with open(reference_dir / "skypilot-catalog" / "aws" / "vms.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for o in (o for o in snap.offers if o.provider == "aws"):
        same = [r for r in rows if r["InstanceType"] == o.instance_type and r["Region"] == o.region]
        assert {float(r["Price"]) for r in same} == {o.price_hour}
        spots = [float(r["SpotPrice"]) for r in same if r["SpotPrice"] and not math.isnan(float(r["SpotPrice"]))]
        if o.spot_price_hour is not None:
            assert o.spot_price_hour == min(spots)


def test_local_builds_follow_the_tiers_and_sum_their_parts(snap) -> None:
    assert len(snap.builds) >= 6
    gpus = {(b.gpu, b.gpu_count) for b in snap.builds}
    assert {("RTX3060", 1), ("RTX4090", 1), ("RTX3090", 2), ("RTX5090", 1), ("RTX6000Ada", 1)} <= gpus
    for b in snap.builds:
        assert b.price_usd == pytest.approx(sum(p.price_usd for p in b.parts), abs=0.01)
        assert b.psu_w >= 1.3 * b.load_power_w
        assert 0 < b.resale_fraction < 1
        assert b.source and b.electricity_source


def test_every_part_is_sourced_and_dated(snap) -> None:
    for p in snap.parts:
        assert p.source.strip() and p.as_of and p.price_usd > 0, p.id


def test_as_of_and_sources_cover_every_provider_and_local(snap) -> None:
    providers = {o.provider for o in snap.offers} | {"local"}
    assert set(snap.as_of) == providers
    assert set(snap.sources) == providers


def test_snapshot_id_is_a_stable_content_hash() -> None:
    load_bundled.cache_clear()
    first = load_bundled().snapshot_id
    load_bundled.cache_clear()
    assert load_bundled().snapshot_id == first
    assert load_bundled() is load_bundled()


def test_every_provider_passes_the_refresh_validation(snap) -> None:
    by_provider: dict[str, list] = {}
    for o in snap.offers:
        by_provider.setdefault(o.provider, []).append(o)
    by_provider["local"] = list(snap.builds)
    for provider, rows in by_provider.items():
        validate_rows(provider, rows)
