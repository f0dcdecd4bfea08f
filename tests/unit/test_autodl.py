from __future__ import annotations

from pathlib import Path

import pytest

from optimizer.errors import InvalidInput, UnknownGpu
from pricing.adapters.autodl import AutodlSource, offers_from_csv, parse_price
from pricing.currency import fx_rate
from pricing.errors import ProviderError
from pricing.source import SourceSettings, registered_sources

HEADER = "provider,product,gpu,max_gpus,price_per_gpu_hour,currency,billing_increment_s,as_of,confidence,source\n"


def test_registered_as_autodl() -> None:
    assert registered_sources()["autodl"] is AutodlSource


@pytest.mark.parametrize(("text", "value", "ranged"), [("2.18", 2.18, False), ("2.5-3.5", 3.0, True), ("10.0-12.0", 11.0, True)])
def test_parse_price(text: str, value: float, ranged: bool) -> None:
    assert parse_price(text) == (pytest.approx(value), ranged)


@pytest.mark.parametrize("bad", ["", "abc", "3-2", "0", "-1", "inf", "nan", "1e308", "2-9999999"])
def test_parse_price_rejects_garbage(bad: str) -> None:
    with pytest.raises(InvalidInput):
        parse_price(bad)


def test_rows_become_per_count_offers_in_cny_and_usd() -> None:
    text = HEADER + "autodl,RTX 4090,rtx 4090,2,2.5-3.5,CNY,60,2026-08-30,low,a guide\n"
    offers = offers_from_csv(text, "autodl-2026-08.csv")
    assert [o.instance_type for o in offers] == ["autodl-rtx4090-1x", "autodl-rtx4090-2x"]
    two = offers[1]
    assert two.gpu_count == 2 and two.price_hour_native == pytest.approx(6.0)
    assert two.price_hour == pytest.approx(6.0 * fx_rate("CNY").rate_to_usd, rel=1e-6)
    assert two.billing_increment_s == 60
    assert "midpoint" in two.source and "confidence low" in two.source
    assert two.as_of.isoformat().startswith("2026-08-30")


def test_missing_billing_increment_is_flagged_assumed() -> None:
    [offer] = offers_from_csv(HEADER + "autodl,x,RTX3090,1,2,CNY,,2025-10-01,low,g\n", "f.csv")
    assert offer.billing_increment_s == 1 and "assumed" in offer.source


def test_unknown_gpu_is_rejected() -> None:
    with pytest.raises(UnknownGpu):
        offers_from_csv(HEADER + "autodl,x,GTX 9999,1,2,CNY,,2025-10-01,low,g\n", "f.csv")


def test_newest_file_wins(tmp_path: Path) -> None:
    (tmp_path / "autodl-2025-10.csv").write_text(HEADER + "autodl,x,RTX3090,1,2.4,CNY,,2025-10-01,low,old\n", "utf-8")
    (tmp_path / "autodl-2026-02.csv").write_text(HEADER + "autodl,x,RTX3090,1,1.9,CNY,,2026-02-01,low,new\n", "utf-8")
    (tmp_path / "notes.txt").write_text("ignored", "utf-8")
    source = AutodlSource.from_settings(SourceSettings(autodl_dir=str(tmp_path)))
    raw = source.fetch()
    assert raw.payloads["file"] == "autodl-2026-02.csv"
    [offer] = source.parse(raw)
    assert offer.price_hour_native == 1.9


def test_empty_folder_is_a_provider_error(tmp_path: Path) -> None:
    with pytest.raises(ProviderError):
        AutodlSource.from_settings(SourceSettings(autodl_dir=str(tmp_path))).fetch()


def test_bundled_files_parse() -> None:
    source = AutodlSource.from_settings(SourceSettings())
    offers = source.parse(source.fetch())
    assert {"autodl", "featurize"} <= {o.provider for o in offers}
