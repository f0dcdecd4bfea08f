"""Prices far from the same provider's median for a GPU are flagged (kept, not dropped)."""

from __future__ import annotations

from pathlib import Path

from pricing.adapters.skypilot_csv import load_skypilot
from pricing.validate import price_outliers
from tests.unit.decide_fakes import offer


def test_flags_only_what_is_far_from_its_own_providers_median() -> None:
    rows = [offer(f"a100-{i}", "A100", 1, 3.0 + i / 10, region=f"r{i}") for i in range(5)]
    rows.append(offer("stale", "A100", 8, 8 * 1.2, region="old"))  # 1.2 $/GPU-h against ~3.2
    rows.append(offer("pricey", "A100", 1, 7.5, region="far"))  # 2.3x
    # Another provider at a third of the price is not an outlier of this one.
    rows += [offer(f"m-{i}", "A100", 1, 1.0, provider="vast", region=f"v{i}") for i in range(3)]
    flagged = {o.instance_type: round(r, 2) for o, r in price_outliers(rows)}
    assert set(flagged) == {"stale", "pricey"}
    assert flagged["stale"] < 0.5 < 2 < flagged["pricey"]


def test_too_few_peers_are_not_judged() -> None:
    rows = [offer("a", "L4", 1, 0.5), offer("b", "L4", 1, 5.0)]
    assert price_outliers(rows) == []


def test_the_reference_catalogs_anomaly_is_flagged(reference_dir: Path) -> None:
    """GCP's us-central1 H100 row is half the price of every other region (prices-notes.md s.2)."""
    offers = load_skypilot(reference_dir / "skypilot-catalog" / "gcp" / "vms.csv")
    flagged = {(o.region, o.instance_type) for o, _ in price_outliers(offers)}
    assert ("us-central1", "a3-highgpu-8g") in flagged
    assert ("us-east4", "a3-highgpu-8g") not in flagged
