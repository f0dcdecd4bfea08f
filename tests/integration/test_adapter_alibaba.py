"""Alibaba adapter with a fake ECS client that answers with the SDK's own response models."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from alibabacloud_ecs20140526 import models
from alibabacloud_tea_openapi.exceptions import ClientException, ThrottlingException

from pricing.adapters.alibaba import AlibabaSource, alibaba_offers
from pricing.errors import MissingCredentials, ProviderError
from pricing.source import RawSnapshot, SourceSettings

FIXTURE = json.loads(
    (Path(__file__).parents[1] / "data" / "api" / "alibaba_ecs_cn_shanghai_built.json").read_text()
)


class FakeEcsClient:
    def __init__(self, fixture: dict[str, Any], fail_with: Exception | None = None) -> None:
        self.fixture = fixture
        self.fail_with = fail_with
        self.tokens: list[str | None] = []
        self.families: list[list[str]] = []

    def describe_instance_types(self, request: models.DescribeInstanceTypesRequest):
        if self.fail_with:
            raise self.fail_with
        self.tokens.append(request.next_token)
        self.families.append(request.instance_type_families)
        index = 0 if request.next_token is None else 1
        body = models.DescribeInstanceTypesResponseBody().from_map(
            self.fixture["DescribeInstanceTypes"][index]
        )
        return models.DescribeInstanceTypesResponse(status_code=200, body=body)

    def describe_price(self, request: models.DescribePriceRequest):
        assert request.price_unit == "Hour" and request.resource_type == "instance"
        code = self.fixture["DescribePriceErrors"].get(request.instance_type)
        if code:
            raise ClientException(code=code, message="The specified InstanceType does not exist.")
        body = models.DescribePriceResponseBody().from_map(
            self.fixture["DescribePrice"][request.instance_type]
        )
        return models.DescribePriceResponse(status_code=200, body=body)

    def describe_spot_price_history(self, request: models.DescribeSpotPriceHistoryRequest):
        answer = self.fixture["DescribeSpotPriceHistory"].get(request.instance_type) or {
            "SpotPrices": {"SpotPriceType": []}
        }
        body = models.DescribeSpotPriceHistoryResponseBody().from_map(answer)
        return models.DescribeSpotPriceHistoryResponse(status_code=200, body=body)


def fixed_rate(amount: float, currency: str, on: date) -> float:
    # A stand-in rate so the arithmetic is visible; the real table is pricing.currency.
    assert currency == "CNY"
    return amount * 0.14


def test_prices_keep_cny_and_convert_to_usd() -> None:
    client = FakeEcsClient(FIXTURE)
    source = AlibabaSource(["cn-shanghai"], lambda region: client, to_usd=fixed_rate)
    raw = source.fetch()
    offers = {o.instance_type: o for o in source.parse(raw)}
    # Both pages of DescribeInstanceTypes are read for each chunk of families.
    chunks = len({tuple(f) for f in client.families})
    assert chunks == 2  # the 12 default families in chunks of at most 10
    assert client.tokens == [None, "page-2"] * chunks
    assert all(0 < len(f) <= 10 for f in client.families)
    expected = FIXTURE["expected_cny_per_hour"]
    assert set(offers) == set(expected)  # the type DescribePrice refused is left out
    for itype, cny in expected.items():
        offer = offers[itype]
        assert offer.currency == "CNY"
        assert offer.price_hour_native == cny
        assert offer.price_hour == pytest.approx(cny * 0.14, abs=1e-6)
        assert offer.region == "cn-shanghai" and offer.source.startswith("alibaba:")
    assert offers["ecs.gn7e-c16g1.4xlarge"].gpu == "A100-80GB"
    assert offers["ecs.gn7-c12g1.3xlarge"].gpu == "A100"
    assert offers["ecs.gn7i-c8g1.2xlarge"].gpu == "A10"
    assert offers["ecs.gn6i-c4g1.xlarge"].spot_price_hour is None


def test_default_conversion_uses_the_dated_rates_table() -> None:
    from pricing.currency import fx_rate

    client = FakeEcsClient(FIXTURE)
    source = AlibabaSource(["cn-shanghai"], lambda region: client)
    raw = source.fetch()
    offer = next(o for o in source.parse(raw) if o.instance_type == "ecs.gn7i-c8g1.2xlarge")
    rate = fx_rate("CNY", on=raw.fetched_at.date()).rate_to_usd
    assert offer.price_hour == pytest.approx(9.53 * rate, abs=1e-6)


def test_spot_keeps_the_newest_price_per_zone() -> None:
    # Synthetic spot records (not prices of any source) to check the per-zone selection only.
    data = {
        "regions": {
            "cn-shanghai": {
                "instance_types": FIXTURE["DescribeInstanceTypes"][0]["InstanceTypes"]["InstanceType"][:1],
                "prices": {},
                "spot": {
                    "ecs.gn6i-c4g1.xlarge": {
                        "SpotPrices": {
                            "SpotPriceType": [
                                {"ZoneId": "cn-shanghai-l", "SpotPrice": 2.0, "Timestamp": "2026-11-29T01:00:00Z"},
                                {"ZoneId": "cn-shanghai-l", "SpotPrice": 3.0, "Timestamp": "2026-11-29T05:00:00Z"},
                                {"ZoneId": "cn-shanghai-m", "SpotPrice": 2.5, "Timestamp": "2026-11-29T02:00:00Z"},
                            ]
                        }
                    }
                },
            }
        }
    }
    offers = alibaba_offers(data, datetime(2026, 11, 29, tzinfo=UTC), fixed_rate)
    assert {o.zone: o.spot_price_hour_native for o in offers} == {"cn-shanghai-l": 3.0, "cn-shanghai-m": 2.5}
    assert all(o.price_hour is None for o in offers)


@pytest.mark.parametrize(
    ("error", "retriable"),
    [
        (ThrottlingException(code="Throttling.User", message="Request was denied due to user flow control."), True),
        (ClientException(code="InvalidAccessKeyId.NotFound", message="Specified access key is not found."), False),
        (TimeoutError("read timed out"), True),
    ],
)
def test_sdk_errors_become_provider_errors(error: Exception, retriable: bool) -> None:
    source = AlibabaSource(["cn-shanghai"], lambda region: FakeEcsClient(FIXTURE, error), to_usd=fixed_rate)
    with pytest.raises(ProviderError) as err:
        source.fetch()
    assert err.value.provider == "alibaba"
    assert err.value.retriable is retriable


def test_from_settings_needs_the_access_key_pair(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ALIBABA_CLOUD_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", raising=False)
    with pytest.raises(MissingCredentials):
        AlibabaSource.from_settings(SourceSettings())
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_ID", "id")
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "secret")
    source = AlibabaSource.from_settings(SourceSettings(alibaba_regions=("cn-beijing",)))
    assert source.regions == ("cn-beijing",)


def test_parse_is_pure_on_a_recorded_snapshot() -> None:
    client = FakeEcsClient(FIXTURE)
    source = AlibabaSource(["cn-shanghai"], lambda region: client, to_usd=fixed_rate)
    raw = source.fetch()
    again = RawSnapshot(raw.provider, raw.fetched_at, json.loads(json.dumps(raw.payloads)))
    assert source.parse(raw) == source.parse(again)
