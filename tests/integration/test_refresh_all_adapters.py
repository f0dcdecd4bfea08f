"""Every adapter on its mocked API, through one refresh into the store and out of the HTTP API.

AWS runs on moto (EC2 instance types) and botocore's Stubber (the Price List Query API, which
moto does not serve, and the spot price history: moto answers every spot query with a fixed
0.00001 USD placeholder, so the spot prices come from the real capture in tests/data/api);
GCP and Alibaba run on the fake SDK clients of their adapter tests; AutoDL and local builds on
their bundled files. Expected figures are read from the fixture files here with json/csv and
Decimal, never through the adapters' parsers.
"""

from __future__ import annotations

import csv
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from fastapi.testclient import TestClient
from moto import mock_aws

import pricing.snapshot
from optimizer.estimator.gpus import find_gpu
from pricing.adapters.alibaba import AlibabaSource
from pricing.adapters.autodl import AutodlSource, bundled_folder
from pricing.adapters.aws import AwsSource
from pricing.adapters.local import LocalSource
from pricing.refresh import RefreshResult, refresh
from pricing.snapshot.loader import BundledSnapshot
from pricing.source import PriceSource, SourceSettings
from pricing.store.repository import PriceStore, open_store
from service.api.app import create_app
from service.settings import Settings
from tests.integration._pricestore import BACKENDS, FAST_RETRIES, backend_url
from tests.integration.test_adapter_alibaba import FIXTURE as ALIBABA_FIXTURE
from tests.integration.test_adapter_alibaba import FakeEcsClient
from tests.integration.test_adapter_aws import _stub_two_pages
from tests.integration.test_adapter_gcp import _source as gcp_source_on_fakes

API = Path(__file__).parents[1] / "data" / "api"
PRICE_LIST = json.loads((API / "aws_get_products_gpu_us_east_1.json").read_text())
SPOT_CAPTURE = json.loads(
    (API / "aws_ec2_describe_spot_price_history_g6_xlarge_us_east_1_2026_flightdeck.json").read_text()
)
AUTODL_DIR = Path(pricing.snapshot.__file__).parent / "data" / "autodl"
REGION = "us-east-1"
CENT = Decimal("0.01")


# -- expected figures, straight from the fixture files ---------------------------------------


def fixture_on_demand_usd() -> dict[str, Decimal]:
    """Instance type -> the non-zero OnDemand hourly pricePerUnit.USD in the Price List pages.

    The p4d.24xlarge Capacity Block SKU lists 0.00 per hour under OnDemand: not a rental price.
    """
    found: dict[str, set[Decimal]] = defaultdict(set)
    for raw in PRICE_LIST["PriceList"]:
        item = json.loads(raw)
        itype = item["product"]["attributes"]["instanceType"]
        for term in item["terms"].get("OnDemand", {}).values():
            for dim in term["priceDimensions"].values():
                usd = Decimal(dim["pricePerUnit"]["USD"])
                if dim["unit"] == "Hrs" and usd > 0:
                    found[itype].add(usd)
    assert all(len(v) == 1 for v in found.values()), found
    return {itype: prices.pop() for itype, prices in found.items()}


def fixture_spot_usd() -> dict[tuple[str, str], Decimal]:
    """(instance type, zone) -> the newest Linux/UNIX spot price of the captured history."""
    newest: dict[tuple[str, str], tuple[datetime, Decimal]] = {}
    for rec in SPOT_CAPTURE["SpotPriceHistory"]:
        key = (rec["InstanceType"], rec["AvailabilityZone"])
        stamp = datetime.fromisoformat(rec["Timestamp"])
        if key not in newest or stamp > newest[key][0]:
            newest[key] = (stamp, Decimal(rec["SpotPrice"]))
    return {key: price for key, (_, price) in newest.items()}


def fixture_autodl_rows() -> Counter[str]:
    """Rows per provider in the newest AutoDL-style file: one per GPU count up to max_gpus."""
    newest = max(AUTODL_DIR.glob("autodl-*.csv"), key=lambda p: p.name)
    rows: Counter[str] = Counter()
    with newest.open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            rows[row["provider"].strip().lower()] += int(row["max_gpus"] or 1)
    return rows


def as_decimal(value: float) -> Decimal:
    # repr of a float is the shortest string that reads back to it: "32.7726" stays 32.7726.
    return Decimal(repr(value))


# -- the mocked clients ----------------------------------------------------------------------


class Ec2FactsFromMotoSpotFromCapture:
    """One region's EC2 client: instance types from moto, the spot history from a stubbed client."""

    def __init__(self, moto_ec2: Any, spot_ec2: Any) -> None:
        self.moto_ec2 = moto_ec2
        self.spot_ec2 = spot_ec2

    def get_paginator(self, operation: str) -> Any:
        client = self.spot_ec2 if operation == "describe_spot_price_history" else self.moto_ec2
        return client.get_paginator(operation)


def stub_spot_capture(client: Any) -> Stubber:
    stub = Stubber(client)
    # boto3 hands out Timestamp as a datetime; the capture holds the CLI's ISO strings.
    history = [
        {**rec, "Timestamp": datetime.fromisoformat(rec["Timestamp"])}
        for rec in SPOT_CAPTURE["SpotPriceHistory"]
    ]
    stub.add_response(
        "describe_spot_price_history",
        {"SpotPriceHistory": history},
        {"InstanceTypes": ANY, "ProductDescriptions": ["Linux/UNIX"], "StartTime": ANY},
    )
    return stub


def always_throttled(client: Any, calls: int) -> Stubber:
    stub = Stubber(client)
    for _ in range(calls):
        stub.add_client_error(
            "get_products", service_error_code="ThrottlingException", service_message="Rate exceeded",
            http_status_code=400,
        )
    return stub


def alibaba_source() -> AlibabaSource:
    client = FakeEcsClient(ALIBABA_FIXTURE)
    return AlibabaSource(["cn-shanghai"], lambda region: client)


def factory(source: PriceSource) -> Callable[[SourceSettings], PriceSource]:
    # A plain callable: given the instance itself, refresh would call its from_settings.
    return lambda _settings: source


# -- store and API ---------------------------------------------------------------------------


def no_seed() -> BundledSnapshot:
    return BundledSnapshot(offers=[], builds=[], parts=[], as_of={}, sources={}, snapshot_id="empty")


@dataclass
class Backend:
    url: str
    store: PriceStore


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    with backend_url(request, tmp_path, request.param) as url:
        # Empty at first, so each provider's first snapshot is the one the refresh writes: the
        # bundled snapshot's AWS rows span more regions than the one-region fixture, and the
        # fixture would be refused as a row collapse against them.
        store = open_store(url, seed=no_seed)
        yield Backend(url, store)
        store.close()


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def api(backend: Backend) -> Iterator[TestClient]:
    app = create_app(Settings(db_url=backend.url))
    with TestClient(app) as client:
        yield client
    assert app.state.store is None  # the app closes the store it opened when it shuts down


def by_provider(results: list[RefreshResult]) -> dict[str, RefreshResult]:
    named = {r.provider: r for r in results}
    assert len(named) == len(results), results
    return named


def moto_instance_facts(ec2: Any, instance_types: list[str]) -> dict[str, dict[str, Any]]:
    answer = ec2.describe_instance_types(InstanceTypes=instance_types)["InstanceTypes"]
    return {it["InstanceType"]: it for it in answer}


def served(store: PriceStore, provider: str) -> list[dict[str, Any]]:
    rows = [o.model_dump(mode="json") for o in store.all_offers() if o.provider == provider]
    return sorted(rows, key=lambda o: (o["region"], o["zone"] or "", o["instance_type"]))


def status_of(api: TestClient, provider: str) -> dict[str, Any]:
    r = api.get("/v1/prices/status")
    assert r.status_code == 200, r.text
    return next(p for p in r.json()["providers"] if p["provider"] == provider)


@dataclass
class FirstRefresh:
    results: dict[str, RefreshResult]
    gcp_expected: list[tuple[tuple[str, str, str, str], float | None]]
    local_expected: set[str]
    moto_facts: dict[str, dict[str, Any]]


def refresh_everything(store: PriceStore) -> FirstRefresh:
    """One refresh over the five adapters on their mocked APIs and bundled files."""
    # Independent instances read the same fakes, to know what GCP and local should yield.
    gcp_check = gcp_source_on_fakes()
    gcp_expected = sorted((o.key, o.price_hour) for o in gcp_check.parse(gcp_check.fetch()))
    local_check = LocalSource()
    local_expected = {b.id for b in local_check.parse(local_check.fetch())}

    with mock_aws():
        pricing_client = boto3.client("pricing", region_name=REGION)
        moto_ec2 = boto3.client("ec2", region_name=REGION)
        spot_ec2 = boto3.client("ec2", region_name=REGION)
        ec2 = Ec2FactsFromMotoSpotFromCapture(moto_ec2, spot_ec2)
        aws = AwsSource([REGION], pricing_client, lambda region: ec2)
        sources = {
            "aws": factory(aws),
            "gcp": factory(gcp_source_on_fakes()),
            "alibaba": factory(alibaba_source()),
            "autodl": factory(AutodlSource(bundled_folder())),
            "local": factory(LocalSource()),
        }
        with _stub_two_pages(pricing_client) as prices_stub, stub_spot_capture(spot_ec2) as spot_stub:
            results = refresh(store, FAST_RETRIES, sources=sources)
            prices_stub.assert_no_pending_responses()
            spot_stub.assert_no_pending_responses()
        facts = moto_instance_facts(moto_ec2, sorted(fixture_on_demand_usd()))
    return FirstRefresh(by_provider(results), gcp_expected, local_expected, facts)


# -- the tests -------------------------------------------------------------------------------


def test_refresh_of_every_adapter_serves_the_price_list_to_the_cent(
    aws_env: None, backend: Backend, api: TestClient
) -> None:
    first = refresh_everything(backend.store)
    on_demand = fixture_on_demand_usd()
    spot = fixture_spot_usd()
    spot_zones: dict[str, list[str]] = defaultdict(list)
    for itype, zone in spot:
        spot_zones[itype].append(zone)
    aws_types = set(on_demand) | set(spot_zones)
    # One row per zone with a spot price, else one region-wide row.
    aws_rows = sum(len(spot_zones.get(t, [])) or 1 for t in aws_types)
    autodl_rows = fixture_autodl_rows()

    expected_rows: Mapping[str, int] = {
        "aws": aws_rows,
        "gcp": len(first.gcp_expected),
        "alibaba": len(ALIBABA_FIXTURE["expected_cny_per_hour"]),
        "local": len(first.local_expected),
        **autodl_rows,
    }
    assert {p: (r.status, r.rows, r.error) for p, r in first.results.items()} == {
        p: ("updated", n, None) for p, n in expected_rows.items()
    }
    assert all(r.attempts == 1 for r in first.results.values())

    # AWS on-demand: the Price List figures, to the cent (and in fact exactly).
    aws = backend.store.offers(providers=["aws"])
    assert len(aws) == aws_rows
    assert {o.instance_type for o in aws} == aws_types
    for offer in aws:
        want = on_demand[offer.instance_type]
        assert offer.price_hour is not None
        assert as_decimal(offer.price_hour).quantize(CENT) == want.quantize(CENT), offer
        assert as_decimal(offer.price_hour) == want, offer
        assert offer.currency == "USD" and offer.region == REGION

    # AWS spot: the captured price of each zone; types without spot history have none.
    spot_served = {(o.instance_type, o.zone): as_decimal(o.spot_price_hour) for o in aws if o.spot_price_hour}
    assert spot_served == spot
    assert all(o.zone is None and o.spot_price_hour is None for o in aws if o.instance_type not in spot_zones)

    # AWS instance facts: what moto's DescribeInstanceTypes says, asked directly.
    assert set(first.moto_facts) == aws_types
    for offer in aws:
        it = first.moto_facts[offer.instance_type]
        gpu = it["GpuInfo"]["Gpus"][0]
        assert offer.gpu == find_gpu(gpu["Name"]) and offer.gpu_count == gpu["Count"], offer
        assert offer.vcpus == it["VCpuInfo"]["DefaultVCpus"]
        assert offer.ram_gb == pytest.approx(it["MemoryInfo"]["SizeInMiB"] * 2**20 / 1e9, abs=0.01)
        # The GPU's own memory is the catalog's; EC2 reports it in MiB net of a small reserve.
        assert offer.gpu_vram_gb == pytest.approx(gpu["MemoryInfo"]["SizeInMiB"] * 2**20 / 1e9, rel=0.1)

    # The other sources: what their fixtures and files hold, stored in full.
    assert sorted((o.key, o.price_hour) for o in backend.store.all_offers() if o.provider == "gcp") == (
        first.gcp_expected
    )
    alibaba = {o.instance_type: o for o in backend.store.all_offers() if o.provider == "alibaba"}
    assert {t: Decimal(repr(o.price_hour_native)) for t, o in alibaba.items()} == {
        t: Decimal(repr(cny)) for t, cny in ALIBABA_FIXTURE["expected_cny_per_hour"].items()
    }
    assert all(o.currency == "CNY" for o in alibaba.values())
    assert {b.id for b in backend.store.local_builds()} == first.local_expected

    # Over HTTP: AWS fresh with its row count, and its offers cheapest first.
    aws_status = status_of(api, "aws")
    as_of = {o.as_of for o in aws}
    assert len(as_of) == 1
    assert (aws_status["rows"], aws_status["last_error"], aws_status["stale"]) == (aws_rows, None, False)
    assert datetime.fromisoformat(aws_status["as_of"]) == as_of.pop()
    listed = api.get("/v1/offers", params={"provider": "aws"})
    assert listed.status_code == 200, listed.text
    body = listed.json()["offers"]
    assert {o["provider"] for o in body} == {"aws"}
    expected_prices = sorted(
        on_demand[t] for t in on_demand for _ in range(len(spot_zones.get(t, [])) or 1)
    )
    assert [as_decimal(o["price_hour"]) for o in body] == expected_prices
    assert body[0]["instance_type"] == min(on_demand, key=on_demand.__getitem__)


def test_failed_aws_refresh_keeps_serving_its_last_good_prices(
    aws_env: None, backend: Backend, api: TestClient
) -> None:
    first = refresh_everything(backend.store)
    assert first.results["aws"].status == "updated"
    aws_before = served(backend.store, "aws")
    gcp_before = status_of(api, "gcp")
    aws_status_before = status_of(api, "aws")
    listed_before = api.get("/v1/offers", params={"provider": "aws"}).json()["offers"]
    assert len(listed_before) == len(aws_before) == first.results["aws"].rows

    attempts = int(FAST_RETRIES.extra["retry_attempts"])
    with mock_aws():
        pricing_client = boto3.client("pricing", region_name=REGION)
        moto_ec2 = boto3.client("ec2", region_name=REGION)
        aws = AwsSource([REGION], pricing_client, lambda region: moto_ec2)
        sources = {
            "aws": factory(aws),
            "gcp": factory(gcp_source_on_fakes()),
            "alibaba": factory(alibaba_source()),
        }
        with always_throttled(pricing_client, attempts) as stub:
            second = by_provider(refresh(backend.store, FAST_RETRIES, sources=sources))
            # Every attempt the retry policy allows was made, and no more.
            stub.assert_no_pending_responses()

    failed = second["aws"]
    assert (failed.status, failed.rows) == ("failed", 0)
    assert "ThrottlingException" in (failed.error or "")
    for provider in ("gcp", "alibaba"):
        assert (second[provider].status, second[provider].error) == ("updated", None)
        assert second[provider].rows == first.results[provider].rows

    # The store and the API still serve the first refresh's AWS rows, unchanged.
    assert served(backend.store, "aws") == aws_before
    assert api.get("/v1/offers", params={"provider": "aws"}).json()["offers"] == listed_before

    aws_status = status_of(api, "aws")
    assert aws_status["last_error"] == failed.error
    assert (aws_status["rows"], aws_status["as_of"]) == (aws_status_before["rows"], aws_status_before["as_of"])
    when = datetime.fromisoformat
    assert when(aws_status["last_attempt"]) > when(aws_status_before["last_attempt"])
    gcp_status = status_of(api, "gcp")
    assert gcp_status["last_error"] is None
    assert when(gcp_status["as_of"]) > when(gcp_before["as_of"])


def test_moto_placeholder_spot_price_is_refused_and_the_rest_refreshes(
    aws_env: None, backend: Backend
) -> None:
    """moto prices every spot offer at 0.00001 USD: validation refuses the whole AWS list."""
    with mock_aws():
        pricing_client = boto3.client("pricing", region_name=REGION)
        moto_ec2 = boto3.client("ec2", region_name=REGION)
        served_spot = moto_ec2.describe_spot_price_history(
            InstanceTypes=["p4d.24xlarge"], ProductDescriptions=["Linux/UNIX"]
        )["SpotPriceHistory"]
        aws = AwsSource([REGION], pricing_client, lambda region: moto_ec2)
        sources = {"aws": factory(aws), "alibaba": factory(alibaba_source())}
        with _stub_two_pages(pricing_client):
            results = by_provider(refresh(backend.store, FAST_RETRIES, sources=sources))

    assert served_spot and {Decimal(r["SpotPrice"]) for r in served_spot} == {Decimal("0.00001")}
    assert results["aws"].status == "failed"
    # A unit slip would look like this; it is not retried, and nothing of AWS is stored.
    assert results["aws"].attempts == 1 and "'price_bounds'" in (results["aws"].error or "")
    assert backend.store.current_rows("aws") is None
    assert results["alibaba"].status == "updated"
    status = {p.provider: p for p in backend.store.status(3)}
    assert status["aws"].last_error == results["aws"].error and status["aws"].rows == 0


def test_failed_refresh_reports_how_many_attempts_it_made(aws_env: None, backend: Backend) -> None:
    attempts = int(FAST_RETRIES.extra["retry_attempts"])
    with mock_aws():
        pricing_client = boto3.client("pricing", region_name=REGION)
        moto_ec2 = boto3.client("ec2", region_name=REGION)
        aws = AwsSource([REGION], pricing_client, lambda region: moto_ec2)
        with always_throttled(pricing_client, attempts) as stub:
            (result,) = refresh(backend.store, FAST_RETRIES, sources={"aws": factory(aws)})
            stub.assert_no_pending_responses()
    assert result.status == "failed"
    assert result.attempts == attempts
