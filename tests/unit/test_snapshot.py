"""The bundled snapshot: every row sourced and dated, every GPU instance of the public catalog,
the coverage the product promises, and reference prices that must survive unchanged
(prices-notes.md, section 3)."""

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


def test_every_offer_is_sourced_dated_and_priced(snap) -> None:
    assert snap.offers
    for o in snap.offers:
        assert o.source.strip(), o.key
        assert o.as_of.tzinfo is not None, o.key
        assert o.gpu_vram_gb > 0, o.key
        # Spot-only rows (AWS p5e has no on-demand list price) are rentable and kept.
        assert (o.price_hour or 0) > 0 or (o.spot_price_hour or 0) > 0, o.key
        assert (o.price_hour_native or 0) > 0 or (o.spot_price_hour_native or 0) > 0, o.key
    # GPUs without specs (B300, RTX PRO 6000 S...) keep the catalog's name; all others are canonical.
    unknown = {o.gpu for o in snap.offers if find_gpu(o.gpu) != o.gpu}
    assert unknown <= {"B300", "RTXA2000", "RTX4070", "RTX4060", "RTXPRO6000S"}


def test_a_fresh_default_knows_every_rentable_instance(snap) -> None:
    from collections import Counter

    counts = Counter(o.provider for o in snap.offers)
    assert sum(counts.values()) >= 3000
    for provider in ("aws", "gcp", "azure", "lambda", "runpod", "vast", "alibaba", "autodl", "nebius",
                     "paperspace", "colab"):
        assert counts[provider] > 0, provider
    aws = {o.instance_type for o in snap.offers if o.provider == "aws" and o.region == "us-east-1"}
    g5 = {f"g5.{size}" for size in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge")}
    assert g5 | {"g4dn.xlarge", "g6.xlarge", "p4d.24xlarge", "p5.48xlarge"} <= aws


def test_every_catalog_instance_type_is_kept(snap, reference_dir: Path) -> None:
    # A PCIe variant must not vanish behind an SXM one with the same GPU and count.
    bundled = {(o.provider, o.instance_type) for o in snap.offers}
    for cloud in ("aws", "azure", "lambda", "runpod", "vast", "nebius", "paperspace"):
        with open(reference_dir / "skypilot-catalog" / cloud / "vms.csv", encoding="utf-8") as f:
            priced = {r["InstanceType"] for r in csv.DictReader(f) if r["AcceleratorName"]
                      and any(_positive(r.get(k)) for k in ("Price", "SpotPrice"))}
        missing = {t for t in priced if (cloud, t) not in bundled}
        assert not missing, (cloud, sorted(missing)[:5])
    lam = {o.instance_type: o.gpu for o in snap.offers if o.provider == "lambda"}
    assert lam["gpu_1x_h100_pcie"] != lam["gpu_1x_h100_sxm5"]


def _positive(text: str | None) -> bool:
    try:
        value = float(text or "nan")
    except ValueError:
        return False
    return not math.isnan(value) and value > 0


def test_fabric_flag_on_the_instances_sold_for_multi_node_training(snap) -> None:
    fabric = {(o.provider, o.instance_type) for o in snap.offers if o.inter_node_fabric}
    assert {("aws", "p4d.24xlarge"), ("aws", "p5.48xlarge"), ("aws", "p4de.24xlarge"), ("gcp", "a3-highgpu-8g"),
            ("gcp", "a2-highgpu-8g"), ("azure", "Standard_ND96isr_H100_v5"),
            ("azure", "Standard_ND96amsr_A100_v4")} <= fabric
    assert not any(p == "aws" and t.startswith("g5.") for p, t in fabric)
    assert ("gcp", "a2-highgpu-1g") not in fabric


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


def test_alibaba_keeps_cny_and_converts_at_the_rate_of_its_date(snap) -> None:
    ali = [o for o in snap.offers if o.provider == "alibaba"]
    assert len({o.region for o in ali}) >= 2
    cny = [o for o in ali if o.currency == "CNY"]
    assert {o.instance_type.split("-")[0] for o in cny} >= {"ecs.gn6v", "ecs.gn7i", "ecs.gn7", "ecs.gn7e"}
    for o in cny:
        rate = fx_rate("CNY", on=o.as_of.date())
        assert rate.as_of.year == 2023  # June 2023 prices, not the newest (2026) rate
        assert o.price_hour == pytest.approx(o.price_hour_native * rate.rate_to_usd, rel=1e-5)
        assert f"rate of {rate.as_of.isoformat()}" in o.source


def test_colab_subscriptions_are_an_effective_hourly_price_with_limits(snap) -> None:
    colab = {o.instance_type: o for o in snap.offers if o.provider == "colab"}
    assert {"colab-pro-t4", "colab-pro-a100", "colab-pro-plus-t4", "colab-pro-plus-a100"} <= set(colab)
    a100 = colab["colab-pro-a100"]
    # 0.10 USD per compute unit x 13.08 units/hour.
    assert a100.price_hour == pytest.approx(1.308) and a100.gpu == "A100" and a100.gpu_count == 1
    assert "Limits:" in a100.source and "units/hour" in a100.source and a100.as_of.year == 2022


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
    # One offer per zone where the catalog has zones; the on-demand list price is the region's.
    found = [o for o in snap.offers if (o.provider, o.region, o.instance_type) == (provider, region, instance)]
    assert found
    assert all(o.price_hour == pytest.approx(price, abs=1e-6) for o in found)


def test_aws_rows_are_the_catalog_rows_zone_by_zone(snap, reference_dir: Path) -> None:
    with open(reference_dir / "skypilot-catalog" / "aws" / "vms.csv", encoding="utf-8") as f:
        rows = {(r["InstanceType"], r["Region"], r["AvailabilityZone"]): r for r in csv.DictReader(f)}
    catalog = [o for o in snap.offers if o.provider == "aws" and o.source.startswith("skypilot-catalog:")]
    assert len(catalog) >= 600
    for o in catalog:
        row = rows[(o.instance_type, o.region, o.zone)]
        assert o.price_hour == (float(row["Price"]) if _positive(row["Price"]) else None)
        assert o.spot_price_hour == (float(row["SpotPrice"]) if _positive(row["SpotPrice"]) else None)


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


def test_the_bundled_catalog_is_the_importers_output_of_the_copied_catalog(reference_dir: Path) -> None:
    # The bundle cannot drift from ``prices import --format skypilot`` on the same files.
    import importlib.util
    from importlib import resources

    spec = importlib.util.spec_from_file_location(
        "build_snapshot", Path(__file__).resolve().parents[2] / "scripts" / "build_snapshot.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    data, counts, _ = module.build(reference_dir / "skypilot-catalog")
    bundled = resources.files("pricing.snapshot").joinpath("data/catalog_offers.csv.gz").read_bytes()
    assert data == bundled
    assert counts["gcp"] > 2000 and counts["aws"] > 600
