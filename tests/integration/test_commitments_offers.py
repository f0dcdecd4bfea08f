"""Commitment terms on offers: parsed from AWS's APIs (recorded response, Stubber), bundled from the
dated reference table, stored with the offers and served by ``gpucost offers`` and GET /v1/offers."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest
from botocore.stub import ANY, Stubber
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from pricing.adapters.aws import AwsSource
from pricing.adapters.aws_commitments import reserved_terms
from pricing.snapshot.commitments import commitments_from_csv, rows_from_reference_csv, write_csv
from service.api.app import create_app
from service.cli import app
from service.settings import Settings

DATA = Path(__file__).parents[1] / "data"
API = DATA / "api"
G6 = json.loads((API / "aws_pricing_get_products_g6_xlarge_us_east_1_2026_flightdeck.json").read_text())
_PAY = {"No Upfront": "no_upfront", "Partial Upfront": "partial_upfront", "All Upfront": "all_upfront"}
runner = CliRunner()


def _reference() -> list[dict[str, str]]:
    lines = [ln for ln in (DATA / "commitments" / "reference_rows.csv").read_text().splitlines()
             if not ln.startswith("#")]
    return list(csv.DictReader(lines))


def _key(term: str, kind: str, payment: str) -> tuple[float, str, str]:
    return ({"1yr": 12.0, "3yr": 36.0}[term], kind.split("_", 1)[1], _PAY[payment])


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}.items():
        monkeypatch.setenv(key, value)


def test_reserved_terms_of_the_real_g6_response_match_the_reference_to_six_decimals() -> None:
    item = json.loads(G6["PriceList"][0]) if isinstance(G6["PriceList"][0], str) else G6["PriceList"][0]
    terms = reserved_terms(item, datetime(2026, 1, 1, tzinfo=UTC))
    assert len(terms) == 12
    got = {(c.term_months, c.offering_class, c.payment): c for c in terms}
    ref = [r for r in _reference() if r["instance_type"] == "g6.xlarge"]
    assert len(ref) == 12
    for r in ref:
        c = got[_key(r["term"], r["kind"], r["payment_option"])]
        assert c.kind == "reserved"
        assert c.upfront_usd == pytest.approx(float(r["upfront_usd"]), abs=1e-9)
        assert c.hourly_usd == pytest.approx(float(r["hourly_usd"]), abs=1e-9)
        assert c.effective_hourly_usd == pytest.approx(float(r["effective_hourly_usd"]), abs=1e-6)
        # The term's own effectiveDate in the response, not the fetch time.
        assert c.as_of.date().isoformat() == "2026-10-07"
        assert c.source.startswith("aws:pricing.get_products")


def test_fetch_reads_savings_plans_and_capacity_blocks_through_stubbed_apis(aws_env: None) -> None:
    pricing = boto3.client("pricing", region_name="us-east-1")
    ec2 = boto3.client("ec2", region_name="us-east-1")
    plans = boto3.client("savingsplans", region_name="us-east-1")
    source = AwsSource(["us-east-1"], pricing, lambda region: ec2, plans, capacity_blocks=True)
    items = json.loads((API / "aws_get_products_gpu_us_east_1.json").read_text())["PriceList"]
    p4d = next(json.loads(i) if isinstance(i, str) else i for i in items
               if "p4d.24xlarge" in str(i) and "RunInstances:CB" not in str(i))
    start = datetime(2026, 12, 8, 11, 30, tzinfo=UTC)
    with Stubber(pricing) as sp, Stubber(ec2) as se, Stubber(plans) as ss:
        se.add_response("describe_instance_types", {"InstanceTypes": [{
            "InstanceType": "p4d.24xlarge", "VCpuInfo": {"DefaultVCpus": 96},
            "MemoryInfo": {"SizeInMiB": 1179648},
            "GpuInfo": {"Gpus": [{"Name": "A100", "Manufacturer": "NVIDIA", "Count": 8,
                                  "MemoryInfo": {"SizeInMiB": 40960}}]}}]}, {"Filters": ANY})
        sp.add_response("get_products", {"PriceList": [json.dumps(p4d)], "FormatVersion": "aws_v1"},
                        {"ServiceCode": "AmazonEC2", "Filters": ANY, "FormatVersion": "aws_v1", "MaxResults": 100})
        se.add_response("describe_spot_price_history", {"SpotPriceHistory": []},
                        {"InstanceTypes": ["p4d.24xlarge"], "ProductDescriptions": ["Linux/UNIX"], "StartTime": ANY})
        # Shapes as the Savings Plans API reference documents them (SavingsPlanOfferingRate).
        rates = json.loads((API / "aws_savingsplans_offering_rates_p4d_built.json").read_text())
        ss.add_response("describe_savings_plans_offering_rates", rates["response"], None)
        se.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": [{
            "CapacityBlockOfferingId": "cbr-0123", "InstanceType": "p4d.24xlarge",
            "AvailabilityZone": "us-east-1a", "InstanceCount": 1, "StartDate": start,
            "EndDate": datetime(2026, 12, 9, 11, 30, tzinfo=UTC), "CapacityBlockDurationHours": 24,
            "UpfrontFee": "354.00", "CurrencyCode": "USD", "Tenancy": "default"}]},
            {"InstanceType": "p4d.24xlarge", "InstanceCount": 1, "CapacityDurationHours": 24})
        raw = source.fetch()
        for stub in (sp, se, ss):
            stub.assert_no_pending_responses()
    [offer] = source.parse(raw)
    kinds = sorted(c.kind for c in offer.commitments)
    assert kinds == ["capacity_block", "savings_plan"]  # the Windows rate is not a Linux price
    plan = next(c for c in offer.commitments if c.kind == "savings_plan")
    assert (plan.term_months, plan.payment, plan.effective_hourly_usd, plan.offering_class) == (
        12, "no_upfront", 14.5, "EC2Instance")
    block = next(c for c in offer.commitments if c.kind == "capacity_block")
    assert block.effective_hourly_usd == pytest.approx(354.0 / 24)
    assert block.starts_at == start and block.payment == "all_upfront"
    assert all(c.source.startswith("aws:") and c.as_of for c in offer.commitments)


def test_savings_plans_without_permission_keep_the_on_demand_prices(aws_env: None) -> None:
    pricing = boto3.client("pricing", region_name="us-east-1")
    ec2 = boto3.client("ec2", region_name="us-east-1")
    plans = boto3.client("savingsplans", region_name="us-east-1")
    source = AwsSource(["us-east-1"], pricing, lambda region: ec2, plans)
    items = json.loads((API / "aws_get_products_gpu_us_east_1.json").read_text())["PriceList"]
    with Stubber(pricing) as sp, Stubber(ec2) as se, Stubber(plans) as ss:
        se.add_response("describe_instance_types", {"InstanceTypes": [{
            "InstanceType": "g6.xlarge", "VCpuInfo": {"DefaultVCpus": 4}, "MemoryInfo": {"SizeInMiB": 16384},
            "GpuInfo": {"Gpus": [{"Name": "L4", "Manufacturer": "NVIDIA", "Count": 1,
                                  "MemoryInfo": {"SizeInMiB": 22888}}]}}]}, {"Filters": ANY})
        sp.add_response("get_products", {"PriceList": items, "FormatVersion": "aws_v1"},
                        {"ServiceCode": "AmazonEC2", "Filters": ANY, "FormatVersion": "aws_v1", "MaxResults": 100})
        se.add_response("describe_spot_price_history", {"SpotPriceHistory": []}, None)
        ss.add_client_error("describe_savings_plans_offering_rates", "AccessDeniedException", "not allowed")
        raw = source.fetch()
        ss.assert_no_pending_responses()
    offers = source.parse(raw)
    assert {o.instance_type for o in offers} >= {"g6.xlarge", "p4d.24xlarge"}
    g6 = next(o for o in offers if o.instance_type == "g6.xlarge")
    assert len(g6.commitments) == 12 and g6.price_hour == 0.8048
    [error] = raw.payloads["commitment_errors"]
    assert error.startswith("savings plan rates: AccessDeniedException")


def test_reference_rows_become_bundle_rows_with_their_source_and_no_guessed_names() -> None:
    text = "\n".join(ln for ln in (DATA / "commitments" / "reference_rows.csv").read_text().splitlines()
                     if not ln.startswith("#"))
    rows = rows_from_reference_csv(text)
    assert not any("missing" in r["instance_type"] for r in rows)  # the nameless H200 row is dropped
    parsed = commitments_from_csv(write_csv(rows))
    p4d = parsed[("aws", "us-east-1", "p4d.24xlarge")]
    assert len(p4d) == 12
    blocks = parsed[("aws", "us-east-2", "p4d.24xlarge")]
    assert [(b.kind, b.effective_hourly_usd, b.as_of.year) for b in blocks] == [("capacity_block", 14.75, 2024)]
    assert all("vantage" in c.source and c.as_of.date().isoformat() == "2025-11-30" for c in p4d)


def _check_p4d(offers: list[dict]) -> None:
    ref = {_key(r["term"], r["kind"], r["payment_option"]): float(r["effective_hourly_usd"])
           for r in _reference() if r["instance_type"] == "p4d.24xlarge" and r["region"] == "us-east-1"}
    assert len(ref) == 12
    p4d = [o for o in offers if o["instance_type"] == "p4d.24xlarge" and o["region"] == "us-east-1"]
    assert p4d, "no p4d.24xlarge in us-east-1"
    for o in p4d:
        reserved = [c for c in o["commitments"] if c["kind"] == "reserved"]
        assert len(reserved) == 12
        got = {(c["term_months"], c["offering_class"], c["payment"]): c["effective_hourly_usd"] for c in reserved}
        assert {k: round(v, 2) for k, v in got.items()} == {k: round(v, 2) for k, v in ref.items()}
        assert all(c["source"] and c["as_of"] for c in o["commitments"])
        # Every term is cheaper per hour than on-demand, which is what makes it a commitment.
        assert max(got.values()) < o["price_hour"]


def test_cli_offers_lists_p4d_with_its_twelve_reserved_terms(tmp_db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCOST_DB_URL", tmp_db_url)
    out = runner.invoke(app, ["offers", "--gpu", "A100", "--count", "8", "--provider", "aws", "--json"])
    assert out.exit_code == 0, out.output
    _check_p4d(json.loads(out.stdout)["offers"])


def test_http_offers_lists_p4d_with_its_twelve_reserved_terms(tmp_db_url: str) -> None:
    with TestClient(create_app(Settings(db_url=tmp_db_url))) as c:
        r = c.get("/v1/offers", params={"gpu": "A100", "gpu_count": 8, "provider": "aws"})
    assert r.status_code == 200, r.text
    _check_p4d(r.json()["offers"])


def test_offers_table_shows_the_lowest_committed_rate(tmp_db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCOST_DB_URL", tmp_db_url)
    monkeypatch.setenv("COLUMNS", "200")
    out = runner.invoke(app, ["offers", "--gpu", "A100", "--count", "8", "--provider", "aws", "--region", "us-east-1"])
    assert out.exit_code == 0, out.output
    assert "committed $/h" in out.stdout
    assert "$8.1591 (12)" in out.stdout  # 3yr standard All Upfront, of the 12 reserved terms
