"""Bills built in the tests, in the three layouts gpucost reads: FOCUS (columns from the spec, in
``tests/data/billing/focus_columns.csv``), AWS CUR 2.0 (Data Exports) and the GCP billing export.

One scenario, written in each layout: every planned run's GPU instance-hours, tagged
``gpucost-run-id``; for the run marked ``covered`` a Savings-Plan-covered line (FOCUS: BilledCost 0,
EffectiveCost amortised; CUR: SavingsPlanCoveredUsage plus its SavingsPlanNegation; GCP: a
committed-use credit); a storage line on the first run; and one untagged line. Amounts are test
parameters derived from each run's quote, not prices.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

FOCUS_COLUMNS = Path(__file__).resolve().parents[1] / "data" / "billing" / "focus_columns.csv"
START = datetime(2026, 11, 10, 8, 0)
# Read the bills a week after their last line: past every provider's billing lag.
NOW = "2026-11-20T00:00:00Z"


def focus_columns(version: str = "1.2") -> list[str]:
    with FOCUS_COLUMNS.open(encoding="utf-8") as f:
        return [r["column_id"] for r in csv.DictReader(f) if r["focus_version"] == version]


def money(x: float) -> str:
    """Ten decimals, as the FOCUS sample writes money."""
    return str(Decimal(str(x)).quantize(Decimal("1E-10")))


@dataclass
class RunUse:
    run_id: str
    hourly_usd: float  # the quote's, all nodes
    instance_hours: float
    resource_id: str
    covered: bool = False  # paid by a Savings Plan / committed use at COVERED_SHARE of the rate
    gpus_per_node: float = 1.0


COVERED_SHARE = 0.7
STORAGE_USD = 3.5
UNTAGGED_USD = 12.3456


@dataclass
class Scenario:
    runs: list[RunUse]
    lines: list[dict[str, object]] = field(default_factory=list)

    def compute_cost(self, u: RunUse) -> Decimal:
        return Decimal(money(u.hourly_usd * u.instance_hours))

    def expected_billed(self, layout: str) -> dict[str, Decimal]:
        out = {}
        for u in self.runs:
            od = self.compute_cost(u)
            billed = od if (not u.covered or layout == "gcp") else Decimal(0)
            out[u.run_id] = billed + (Decimal(money(STORAGE_USD)) if u is self.runs[0] else 0)
        return out

    def expected_effective(self) -> dict[str, Decimal]:
        out = {}
        for u in self.runs:
            od = self.compute_cost(u)
            eff = Decimal(money(float(od) * COVERED_SHARE)) if u.covered else od
            out[u.run_id] = eff + (Decimal(money(STORAGE_USD)) if u is self.runs[0] else 0)
        return out


def _period(hours: float) -> tuple[str, str]:
    end = START + timedelta(hours=max(1.0, hours))
    return START.strftime("%Y-%m-%d %H:%M:%S"), end.strftime("%Y-%m-%d %H:%M:%S")


def focus_bill(s: Scenario, version: str = "1.2") -> tuple[bytes, Decimal, Decimal]:
    """A FOCUS CSV; returns it with the sums of its BilledCost and EffectiveCost columns."""
    cols = focus_columns(version)
    rows: list[dict[str, str]] = []

    def line(**kw: str) -> None:
        base = {c: "" for c in cols}
        base.update(BillingCurrency="USD", ChargeCategory="Usage", ChargeClass="", ChargeFrequency="Usage-Based",
                    ProviderName="AWS", PublisherName="AWS", InvoiceIssuerName="AWS", BillingAccountId="111122223333",
                    RegionId="us-east-1", PricingCategory="Standard")
        base.update(kw)
        rows.append(base)

    for u in s.runs:
        a, b = _period(u.instance_hours)
        cost = s.compute_cost(u)
        covered = {"CommitmentDiscountId": "arn:aws:savingsplans::111122223333:savingsplan/test",
                   "CommitmentDiscountStatus": "Used", "PricingCategory": "Committed"} if u.covered else {}
        line(BilledCost="0" if u.covered else str(cost), ListCost=str(cost), ContractedCost=str(cost),
             EffectiveCost=money(float(cost) * COVERED_SHARE) if u.covered else str(cost),
             ChargePeriodStart=a, ChargePeriodEnd=b, ServiceCategory="Compute", ServiceName="Amazon Elastic Compute Cloud",
             ConsumedQuantity=str(u.instance_hours), ConsumedUnit="Hours", PricingQuantity=str(u.instance_hours),
             PricingUnit="Hours", ResourceId=u.resource_id, ResourceType="instance",
             ChargeDescription="GPU instance hours", Tags=json.dumps({"gpucost-run-id": u.run_id}), **covered)
    first = s.runs[0]
    a, b = _period(first.instance_hours)
    line(BilledCost=money(STORAGE_USD), EffectiveCost=money(STORAGE_USD), ListCost=money(STORAGE_USD),
         ContractedCost=money(STORAGE_USD), ChargePeriodStart=a, ChargePeriodEnd=b, ServiceCategory="Storage",
         ServiceName="Amazon Elastic Block Store", ConsumedQuantity="500", ConsumedUnit="GB-Mo",
         ResourceId="vol-0run1disk", ChargeDescription="gp3 volume left running",
         Tags=json.dumps({"gpucost-run-id": first.run_id}))
    line(BilledCost=money(UNTAGGED_USD), EffectiveCost=money(UNTAGGED_USD), ListCost=money(UNTAGGED_USD),
         ContractedCost=money(UNTAGGED_USD), ChargePeriodStart=a, ChargePeriodEnd=b, ServiceCategory="Compute",
         ServiceName="Amazon Elastic Compute Cloud", ConsumedQuantity="3", ConsumedUnit="Hours",
         ResourceId="i-0untagged", ChargeDescription="an instance nobody tagged", Tags="")
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols)
    w.writeheader()
    w.writerows(rows)
    billed = sum((Decimal(r["BilledCost"]) for r in rows), Decimal(0))
    effective = sum((Decimal(r["EffectiveCost"]) for r in rows), Decimal(0))
    return buf.getvalue().encode(), billed, effective


CUR2_COLUMNS = [
    "bill_billing_period_start_date", "line_item_usage_account_id", "line_item_line_item_type",
    "line_item_usage_start_date", "line_item_usage_end_date", "line_item_product_code", "line_item_usage_type",
    "line_item_operation", "line_item_resource_id", "line_item_usage_amount", "line_item_currency_code",
    "line_item_unblended_rate", "line_item_unblended_cost", "line_item_line_item_description",
    "savings_plan_savings_plan_a_r_n", "savings_plan_savings_plan_effective_cost", "reservation_effective_cost",
    "resource_tags",
]


def cur2_bill(s: Scenario) -> tuple[bytes, Decimal, Decimal]:
    """An AWS CUR 2.0 CSV (map columns as JSON text); returns it with the unblended cost's sum and
    the effective sum (covered usage at the plan's effective cost, its negation at 0)."""
    rows: list[dict[str, str]] = []
    effective = Decimal(0)

    def line(eff: Decimal, **kw: str) -> None:
        nonlocal effective
        base = {c: "" for c in CUR2_COLUMNS}
        base.update(bill_billing_period_start_date="2026-11-01T00:00:00Z", line_item_usage_account_id="111122223333",
                    line_item_currency_code="USD", line_item_line_item_type="Usage", line_item_product_code="AmazonEC2")
        base.update(kw)
        rows.append(base)
        effective += eff

    for u in s.runs:
        a, b = _period(u.instance_hours)
        cost = s.compute_cost(u)
        tags = json.dumps({"user:gpucost-run-id": u.run_id})
        common = dict(line_item_usage_start_date=a.replace(" ", "T") + "Z", line_item_usage_end_date=b.replace(" ", "T") + "Z",
                      line_item_usage_type="USE1-BoxUsage:g5.xlarge", line_item_operation="RunInstances",
                      line_item_resource_id=u.resource_id, resource_tags=tags)
        if u.covered:
            eff = Decimal(money(float(cost) * COVERED_SHARE))
            line(eff, line_item_line_item_type="SavingsPlanCoveredUsage", line_item_usage_amount=str(u.instance_hours),
                 line_item_unblended_cost=str(cost), savings_plan_savings_plan_effective_cost=str(eff),
                 savings_plan_savings_plan_a_r_n="arn:aws:savingsplans::111122223333:savingsplan/test", **common)
            line(Decimal(0), line_item_line_item_type="SavingsPlanNegation", line_item_usage_amount="0",
                 line_item_unblended_cost=str(-cost), **common)
        else:
            line(cost, line_item_usage_amount=str(u.instance_hours), line_item_unblended_cost=str(cost), **common)
    first = s.runs[0]
    a, b = _period(first.instance_hours)
    line(Decimal(money(STORAGE_USD)), line_item_usage_start_date=a, line_item_usage_end_date=b,
         line_item_usage_type="USE1-EBS:VolumeUsage.gp3", line_item_resource_id="vol-0run1disk",
         line_item_usage_amount="500", line_item_unblended_cost=money(STORAGE_USD),
         resource_tags=json.dumps({"user:gpucost-run-id": first.run_id}))
    line(Decimal(money(UNTAGGED_USD)), line_item_usage_start_date=a, line_item_usage_end_date=b,
         line_item_usage_type="USE1-BoxUsage:g5.xlarge", line_item_resource_id="i-0untagged",
         line_item_usage_amount="3", line_item_unblended_cost=money(UNTAGGED_USD))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CUR2_COLUMNS)
    w.writeheader()
    w.writerows(rows)
    billed = sum((Decimal(r["line_item_unblended_cost"]) for r in rows), Decimal(0))
    return buf.getvalue().encode(), billed, effective


GCP_COLUMNS = [
    "billing_account_id", "service.description", "sku.description", "usage_start_time", "usage_end_time",
    "project.id", "labels", "cost", "currency", "usage.amount", "usage.unit", "credits", "resource.global_name",
    "cost_type",
]


def gcp_bill(s: Scenario) -> tuple[bytes, Decimal, Decimal]:
    """A GCP billing export CSV (nested fields flattened with dots, repeated ones as JSON); returns it
    with the sum of ``cost`` and of ``cost`` plus credits."""
    rows: list[dict[str, str]] = []
    effective = Decimal(0)

    def line(credit: Decimal, **kw: str) -> None:
        nonlocal effective
        base = {c: "" for c in GCP_COLUMNS}
        base.update({"billing_account_id": "012345-6789AB-CDEF01", "currency": "USD", "project.id": "ml-team",
                     "cost_type": "regular", "credits": "[]"})
        base.update(kw)
        if credit:
            base["credits"] = json.dumps([{"name": "Committed use discount: GPU", "amount": float(credit),
                                           "type": "COMMITTED_USAGE_DISCOUNT"}])
        rows.append(base)
        effective += Decimal(base["cost"]) + credit

    for u in s.runs:
        a, b = _period(u.instance_hours)
        cost = s.compute_cost(u)
        credit = Decimal(money(float(cost) * COVERED_SHARE)) - cost if u.covered else Decimal(0)
        line(credit, **{"service.description": "Compute Engine", "sku.description": "Nvidia L4 GPU running in Americas",
                        "usage_start_time": a + " UTC", "usage_end_time": b + " UTC",
                        "labels": json.dumps([{"key": "gpucost-run-id", "value": u.run_id}]), "cost": str(cost),
                        "usage.amount": str(u.instance_hours * u.gpus_per_node * 3600), "usage.unit": "seconds",
                        "resource.global_name": u.resource_id})
    first = s.runs[0]
    a, b = _period(first.instance_hours)
    line(Decimal(0), **{"service.description": "Compute Engine", "sku.description": "Balanced PD Capacity",
                        "usage_start_time": a + " UTC", "usage_end_time": b + " UTC",
                        "labels": json.dumps([{"key": "gpucost-run-id", "value": first.run_id}]),
                        "cost": money(STORAGE_USD), "usage.amount": "1000", "usage.unit": "byte-seconds"})
    line(Decimal(0), **{"service.description": "Compute Engine", "sku.description": "Nvidia L4 GPU running in Americas",
                        "usage_start_time": a + " UTC", "usage_end_time": b + " UTC", "labels": "[]",
                        "cost": money(UNTAGGED_USD), "usage.amount": "10800", "usage.unit": "seconds",
                        "resource.global_name": "//compute.googleapis.com/projects/ml-team/zones/us-central1-a/instances/untagged"})
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=GCP_COLUMNS)
    w.writeheader()
    w.writerows(rows)
    billed = sum((Decimal(r["cost"]) for r in rows), Decimal(0))
    return buf.getvalue().encode(), billed, effective
