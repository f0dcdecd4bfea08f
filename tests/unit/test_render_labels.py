"""The labels every table shares (service/render/labels.py) and the Markdown helpers built on them."""

from __future__ import annotations

from datetime import UTC, datetime

from service.render.labels import age_label, age_short, escape_html, pricing_label, region_label
from service.render.markdown import collapse_months, usd

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)


def test_region_labels_drop_empty_parts() -> None:
    assert region_label(", CN, AS") == "CN, AS"
    assert region_label("Quebec, CA, NA") == "Quebec, CA, NA"
    assert region_label(" , ,") == "-" and region_label(None) == "-"


def test_pricing_reads_the_same_everywhere() -> None:
    assert pricing_label("on_demand") == "on-demand" and pricing_label("spot") == "spot"


def test_price_ages() -> None:
    assert age_label(datetime(2025, 11, 30, tzinfo=UTC), NOW) == "2025-11-30, 12 months old"
    assert age_label(datetime(2026, 11, 20, tzinfo=UTC), NOW) == "2026-11-20, 11 days old"
    assert age_label(datetime(2026, 12, 1, 3, tzinfo=UTC), NOW) == "2026-12-01, today"
    assert age_label(datetime(2026, 11, 30), NOW) == "2026-11-30, 1 day old"  # naive read as UTC
    assert age_short(datetime(2022, 4, 21, tzinfo=UTC), NOW) == "55 mo"
    assert age_short(datetime(2026, 11, 26, tzinfo=UTC), NOW) == "5 d" and age_short(None) == "-"


def test_html_is_escaped_outside_code_spans_only() -> None:
    assert escape_html("<img src=x onerror=alert(1)>") == "&lt;img src=x onerror=alert(1)&gt;"
    # Markdown reads no HTML in a code span: a source's "PSU >= 1.3" stays as written there.
    assert escape_html("`PSU >= 1.3` and <b>") == "`PSU >= 1.3` and &lt;b&gt;"
    assert escape_html("an unmatched ` then <i>") == "an unmatched ` then &lt;i&gt;"


def test_money_has_no_negative_zero() -> None:
    assert usd(-0.0) == "$0.00" and usd(-0.004) == "$0.00"
    assert usd(-1172.14) == "-$1,172.14" and usd(9.25) == "$9.25" and usd(None) == "-"
    assert usd(-250_000) == "-$250,000"


def test_identical_consecutive_months_collapse() -> None:
    rows = [(1, ("a",)), (2, ("b",)), (3, ("b",)), (4, ("b",)), (5, ("a",)), (7, ("a",))]
    # A gap (month 6 missing) starts a new row even when the text repeats.
    assert collapse_months(rows) == [("1", "a"), ("2-4", "b"), ("5", "a"), ("7", "a")]
    assert collapse_months([]) == []
