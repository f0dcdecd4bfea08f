"""AWS adapter against moto (EC2) and botocore's Stubber (Price List, which moto does not serve)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ReadTimeoutError
from botocore.stub import Stubber
from moto import mock_aws

from pricing.adapters.aws import AwsSource, aws_offers, latest_spot, on_demand_prices
from pricing.errors import MissingCredentials, ProviderError
from pricing.source import RawSnapshot, SourceSettings

API = Path(__file__).parents[1] / "data" / "api"
PRODUCTS = json.loads((API / "aws_get_products_gpu_us_east_1.json").read_text())
SPOT_G6 = json.loads(
    (API / "aws_ec2_describe_spot_price_history_g6_xlarge_us_east_1_2026_flightdeck.json").read_text()
)

# The on-demand figures printed in the fixtures' pricePerUnit.USD (see their .source.txt / _built).
EXPECTED_ON_DEMAND = {
    "g6.xlarge": 0.8048,  # real capture 2026-10-07
    "p4d.24xlarge": 32.7726,  # real offer file 2024-05-28 (pre-2025 price)
    "g5.xlarge": 1.006,  # built from skypilot-catalog v8
    "p5.48xlarge": 55.04,  # built from skypilot-catalog v8
}

FILTERS = [
    {"Type": "TERM_MATCH", "Field": "regionCode", "Value": "us-east-1"},
    {"Type": "TERM_MATCH", "Field": "operatingSystem", "Value": "Linux"},
    {"Type": "TERM_MATCH", "Field": "tenancy", "Value": "Shared"},
    {"Type": "TERM_MATCH", "Field": "preInstalledSw", "Value": "NA"},
    {"Type": "TERM_MATCH", "Field": "capacitystatus", "Value": "Used"},
    {"Type": "TERM_MATCH", "Field": "instanceFamily", "Value": "GPU instance"},
]


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(key, value)


def _stub_two_pages(client) -> Stubber:
    stub = Stubber(client)
    items = PRODUCTS["PriceList"]
    base = {"ServiceCode": "AmazonEC2", "Filters": FILTERS, "FormatVersion": "aws_v1", "MaxResults": 100}
    stub.add_response(
        "get_products",
        {"PriceList": items[:2], "FormatVersion": "aws_v1", "NextToken": "page-2"},
        base,
    )
    stub.add_response(
        "get_products",
        {"PriceList": items[2:], "FormatVersion": "aws_v1"},
        {**base, "NextToken": "page-2"},
    )
    return stub


def test_refresh_yields_price_list_prices_to_the_cent_and_moto_facts(aws_env: None) -> None:
    with mock_aws():
        pricing = boto3.client("pricing", region_name="us-east-1")
        ec2 = boto3.client("ec2", region_name="us-east-1")
        source = AwsSource(["us-east-1"], pricing, lambda region: ec2)
        with _stub_two_pages(pricing) as stub:
            raw = source.fetch()
            stub.assert_no_pending_responses()
        offers = source.parse(raw)
        moto_spot = ec2.describe_spot_price_history(
            InstanceTypes=["p4d.24xlarge"], ProductDescriptions=["Linux/UNIX"]
        )["SpotPriceHistory"]

    by_type: dict[str, list] = {}
    for offer in offers:
        by_type.setdefault(offer.instance_type, []).append(offer)
    assert set(EXPECTED_ON_DEMAND) <= set(by_type)
    for itype, usd in EXPECTED_ON_DEMAND.items():
        for offer in by_type[itype]:
            assert round(offer.price_hour, 2) == round(usd, 2)
            assert offer.price_hour == pytest.approx(usd, abs=1e-9)

    p4d = by_type["p4d.24xlarge"]
    # Instance facts come from EC2 (moto), not from the price list.
    assert {(o.gpu, o.gpu_count, o.vcpus) for o in p4d} == {("A100", 8, 96)}
    assert by_type["p5.48xlarge"][0].gpu == "H100"
    # Spot: one offer per zone, each with the zone's price as moto reports it.
    moto_by_zone = {r["AvailabilityZone"]: float(r["SpotPrice"]) for r in moto_spot}
    assert {o.zone: o.spot_price_hour for o in p4d} == moto_by_zone
    assert all(o.source.startswith("aws:") and o.as_of == raw.fetched_at for o in offers)
    assert all(o.billing_increment_s == 1 and o.min_billing_s == 60 for o in offers)


def test_capacity_block_and_reserved_terms_are_not_prices() -> None:
    prices = on_demand_prices(PRODUCTS["PriceList"])
    # The Capacity Block SKU (0.00) shares p4d.24xlarge with the OnDemand SKU; only the latter counts.
    assert prices["p4d.24xlarge"]["usd"] == 32.7726
    # g6.xlarge carries 12 reserved terms with upfront fees; the hourly on-demand rate is unaffected.
    assert prices["g6.xlarge"]["usd"] == 0.8048


def test_malformed_item_is_skipped_not_fatal() -> None:
    prices = on_demand_prices(["{not json", *PRODUCTS["PriceList"]])
    assert set(prices) == set(EXPECTED_ON_DEMAND)


def test_real_spot_history_keeps_latest_per_zone() -> None:
    spot = latest_spot(SPOT_G6["SpotPriceHistory"])
    zones = {r["AvailabilityZone"] for r in SPOT_G6["SpotPriceHistory"]}
    assert {z for (_, z) in spot} == zones
    assert spot[("g6.xlarge", "us-east-1c")] == 0.5383
    payloads = {
        "regions": {
            "us-east-1": {
                "products": PRODUCTS["PriceList"][:1],
                "instance_types": [],
                "spot_history": SPOT_G6["SpotPriceHistory"],
            }
        }
    }
    offers = aws_offers(payloads, datetime(2026, 10, 7, tzinfo=UTC))
    assert len(offers) == len(zones)
    # No EC2 description: the GPU falls back to the family table, the count to the price list.
    assert {(o.gpu, o.gpu_count, o.price_hour) for o in offers} == {("L4", 1, 0.8048)}
    assert min(o.spot_price_hour for o in offers) == 0.5383


@pytest.mark.parametrize(
    ("code", "retriable"),
    [("ThrottlingException", True), ("ServiceUnavailableException", True), ("AccessDeniedException", False)],
)
def test_price_list_errors_become_provider_errors(aws_env: None, code: str, retriable: bool) -> None:
    with mock_aws():
        pricing = boto3.client("pricing", region_name="us-east-1")
        ec2 = boto3.client("ec2", region_name="us-east-1")
        source = AwsSource(["us-east-1"], pricing, lambda region: ec2)
        with Stubber(pricing) as stub:
            stub.add_client_error("get_products", service_error_code=code, http_status_code=400)
            with pytest.raises(ProviderError) as err:
                source.fetch()
    assert err.value.provider == "aws"
    assert err.value.retriable is retriable
    assert code in err.value.reason


def test_ec2_timeout_is_retriable(aws_env: None) -> None:
    class TimingOutEc2:
        def get_paginator(self, name: str):
            raise ReadTimeoutError(endpoint_url="https://ec2.us-east-1.amazonaws.com")

    source = AwsSource(["us-east-1"], object(), lambda region: TimingOutEc2())
    with pytest.raises(ProviderError) as err:
        source.fetch()
    assert err.value.retriable is True


def test_from_settings_without_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(MissingCredentials):
        AwsSource.from_settings(SourceSettings())


def test_parse_is_pure_on_a_recorded_snapshot() -> None:
    payloads = {"regions": {"us-east-1": {"products": PRODUCTS["PriceList"], "instance_types": [], "spot_history": []}}}
    raw = RawSnapshot("aws", datetime(2026, 11, 30, tzinfo=UTC), payloads)
    first = AwsSource([], None, lambda r: None).parse(raw)
    assert first == AwsSource([], None, lambda r: None).parse(raw)
    assert all(o.zone is None for o in first)


def test_empty_pages_are_followed_to_the_end(aws_env: None) -> None:
    with mock_aws():
        pricing = boto3.client("pricing", region_name="us-east-1")
        ec2 = boto3.client("ec2", region_name="us-east-1")
        source = AwsSource(["us-east-1"], pricing, lambda region: ec2)
        base = {"ServiceCode": "AmazonEC2", "Filters": FILTERS, "FormatVersion": "aws_v1", "MaxResults": 100}
        with Stubber(pricing) as stub:
            stub.add_response("get_products", {"PriceList": [], "NextToken": "t1"}, base)
            stub.add_response(
                "get_products", {"PriceList": PRODUCTS["PriceList"]}, {**base, "NextToken": "t1"}
            )
            raw = source.fetch()
    offers = source.parse(raw)
    # Types moto describes but the price list does not price get spot-only offers.
    assert {o.instance_type for o in offers if o.price_hour} == set(EXPECTED_ON_DEMAND)
