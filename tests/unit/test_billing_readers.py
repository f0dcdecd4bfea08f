"""Bill readers on real rows (the official FOCUS 1.0 sample) and on each layout's variants: Parquet,
map columns, legacy CUR names, other currencies, and the errors that name the column."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from pathlib import Path

import pytest

from pricing.billing import BillFileError, read_bill
from pricing.billing import table as bill_table

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "billing" / "focus_1.0_sample_rows.csv"


def test_official_focus_sample_rows() -> None:
    data = SAMPLE.read_bytes()
    bill = read_bill(data)
    assert bill.format == "focus"
    rows = list(csv.DictReader(io.StringIO(data.decode())))
    assert sum(ln.billed_usd for ln in bill.lines) == sum(Decimal(r["BilledCost"]) for r in rows)
    g5 = [ln for ln in bill.lines if "g5.4xlarge" in ln.description]
    assert len(g5) == 3 and all(ln.category == "compute" and ln.provider == "aws" for ln in g5)
    assert sum(ln.hours for ln in g5) == pytest.approx(sum(float(r["ConsumedQuantity"]) for r in rows
                                                         if "g5.4xlarge" in r["ChargeDescription"]))
    covered = [ln for ln in bill.lines if ln.covered]
    assert len(covered) == 2 and all(ln.billed_usd == 0 for ln in covered)
    storage = [r["ServiceCategory"] == "Storage" for r in rows]
    assert sum(storage) == 2 and [ln.category == "storage" for ln in bill.lines] == storage
    # Tags as the JSON object the row holds; "NULL" (how the sample writes a missing value) is none.
    assert [ln.tags for ln in bill.lines] == [{} if r["Tags"] == "NULL" else json.loads(r["Tags"]) for r in rows]
    assert bill.lines[0].tags["application"] == "BrightPathMatrix"


def test_focus_parquet_reads_as_the_csv() -> None:
    import pandas as pd

    frame = pd.read_csv(SAMPLE, dtype=str, keep_default_na=False)
    buf = io.BytesIO()
    frame.to_parquet(buf, index=False)
    assert [(ln.billed_usd, ln.hours, ln.category) for ln in read_bill(buf.getvalue(), "focus").lines] == [
        (ln.billed_usd, ln.hours, ln.category) for ln in read_bill(SAMPLE.read_bytes(), "focus").lines]


def _cur2_rows() -> list[dict[str, object]]:
    base = {"line_item_line_item_type": "Usage", "line_item_usage_start_date": "2026-11-01T00:00:00Z",
            "line_item_usage_end_date": "2026-11-01T01:00:00Z", "line_item_currency_code": "USD",
            "line_item_usage_type": "USE1-BoxUsage:g5.xlarge", "line_item_resource_id": "i-1",
            "line_item_usage_amount": 1.0, "line_item_unblended_cost": 1.006}
    return [base, {**base, "line_item_usage_type": "USE1-EBS:VolumeUsage.gp3", "line_item_unblended_cost": 0.11}]


def test_cur2_parquet_with_a_map_column_of_tags() -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = _cur2_rows()
    table = pa.Table.from_pylist(rows).append_column(
        "resource_tags", pa.array([[("user_gpucost_run_id", "r-7")], []], type=pa.map_(pa.string(), pa.string())))
    buf = io.BytesIO()
    pq.write_table(table, buf)
    bill = read_bill(buf.getvalue())
    assert bill.format == "cur2"
    assert [ln.category for ln in bill.lines] == ["compute", "storage"]
    assert bill.lines[0].run_id == "r-7" and bill.lines[1].tags == {}
    assert sum(ln.billed_usd for ln in bill.lines) == Decimal("1.116")


def test_legacy_cur_column_names() -> None:
    text = ("lineItem/LineItemType,lineItem/UsageStartDate,lineItem/UsageEndDate,lineItem/CurrencyCode,"
            "lineItem/UsageType,lineItem/UsageAmount,lineItem/UnblendedCost,resourceTags/user:gpucost-run-id\n"
            "Usage,2023-11-01T00:00:00Z,2023-11-01T01:00:00Z,USD,USE1-BoxUsage:p4d.24xlarge,1,32.77,run-9\n")
    (ln,) = read_bill(text.encode(), "cur2").lines
    assert ln.run_id == "run-9" and ln.hours == 1 and ln.billed_usd == Decimal("32.77")


def test_gcp_other_currency_converts_by_its_own_rate() -> None:
    row = {"cost": "100", "currency": "EUR", "currency_conversion_rate": "0.8", "usage_start_time": "2026-11-01 00:00:00 UTC",
           "usage_end_time": "2026-11-01 01:00:00 UTC", "service.description": "Compute Engine",
           "sku.description": "Nvidia L4 GPU running in EMEA", "usage.amount": "7200", "usage.unit": "seconds",
           "credits": json.dumps([{"name": "CUD", "amount": -20}]), "labels": "[]"}
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(row))
    w.writeheader()
    w.writerow(row)
    (ln,) = read_bill(buf.getvalue().encode(), "gcp-billing").lines
    assert ln.billed_usd == Decimal(125) and ln.effective_usd == Decimal(100) and ln.hours == 2 and ln.hours_per == "gpu"


def _focus(rows: list[dict[str, str]]) -> bytes:
    cols = ["BilledCost", "EffectiveCost", "BillingCurrency", "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory",
            "ServiceCategory", "ProviderName", "ConsumedQuantity", "ConsumedUnit", "Tags"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols)
    w.writeheader()
    for r in rows:
        w.writerow({"EffectiveCost": r.get("BilledCost", "1"), "ChargePeriodStart": "2026-11-01T00:00:00Z",
                    "ChargePeriodEnd": "2026-11-01T01:00:00Z", "ChargeCategory": "Usage", "ServiceCategory": "Compute",
                    "ProviderName": "AWS", "ConsumedQuantity": "1", "ConsumedUnit": "Hours", "Tags": "",
                    "BilledCost": "1", "BillingCurrency": "USD", **r})
    return buf.getvalue().encode()


def test_mixed_currencies_need_rates() -> None:
    data = _focus([{}, {"BillingCurrency": "EUR", "BilledCost": "2"}])
    with pytest.raises(BillFileError) as err:
        read_bill(data)
    assert err.value.field == "BillingCurrency" and "EUR" in err.value.reason
    lines = read_bill(data, rates={"EUR": 1.1}).lines
    assert [ln.billed_usd for ln in lines] == [Decimal(1), Decimal("2.2")]


@pytest.mark.parametrize(("change", "column", "words"), [
    ({"ChargePeriodStart": "yesterday"}, "ChargePeriodStart", "ISO 8601"),
    ({"ConsumedQuantity": "-2"}, "ConsumedQuantity", "negative"),
    ({"BilledCost": "1,5"}, "BilledCost", "not a number"),
    ({"Tags": "[1, 2]"}, "Tags", "key/value"),
    ({"ChargePeriodEnd": "2026-10-01T00:00:00Z"}, "ChargePeriodEnd", "before"),
])
def test_errors_name_the_column_and_row(change: dict[str, str], column: str, words: str) -> None:
    with pytest.raises(BillFileError) as err:
        read_bill(_focus([{}, change]))
    assert err.value.field == column and "row 3" in err.value.reason and words in err.value.reason


def test_wrong_columns_and_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(BillFileError) as err:
        read_bill(b"a,b\n1,2\n")
    assert err.value.field == "format"
    with pytest.raises(BillFileError) as err:
        read_bill(b"BilledCost,ProviderName\n1,AWS\n")
    assert err.value.field == "EffectiveCost" and "not a FOCUS file" in err.value.reason
    with pytest.raises(BillFileError) as err:
        read_bill(b"BilledCost,EffectiveCost\n1\n")
    assert err.value.field == "file" and "row 2" in err.value.reason
    monkeypatch.setattr(bill_table, "MAX_BILL_BYTES", 100)
    with pytest.raises(BillFileError) as err:
        read_bill(_focus([{}]))
    assert err.value.field == "file" and "limit" in err.value.reason
