"""Azure, Lambda, RunPod and Vast adapters on responses built as the providers document them
(tests/data/api/*_built.json), served on 127.0.0.1; and ``gpucost prices refresh`` reporting per
provider what it refreshed, skipped (and why) or failed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from typer.testing import CliRunner

from pricing.adapters.azure import AzureSource
from pricing.adapters.lambda_cloud import LambdaSource
from pricing.adapters.runpod import RunpodSource
from pricing.adapters.vast import VastSource
from pricing.errors import MissingCredentials, ProviderError
from pricing.source import SourceSettings
from service.cli import app
from tests.integration._provider_apis import LAMBDA_KEY, RUNPOD_KEY, FakeApis, provider_apis

runner = CliRunner()
KEYS = ("LAMBDA_API_KEY", "RUNPOD_API_KEY", "VAST_API_KEY")


@pytest.fixture
def apis(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeApis]:
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    with provider_apis() as fake:
        for k, v in fake.env().items():
            monkeypatch.setenv(k, v)
        yield fake


def _by(offers: list) -> dict[tuple[str, str], object]:  # type: ignore[type-arg]
    return {(o.region, o.instance_type): o for o in offers}


def test_azure_pages_consumption_and_reservations(apis: FakeApis) -> None:
    source = AzureSource.from_settings(SourceSettings())
    raw = source.fetch()
    offers = _by(source.parse(raw))
    # Three GPU sizes; the D-series CPU size, Windows and Low Priority items are ignored.
    assert set(offers) == {("eastus", "Standard_NC24ads_A100_v4"), ("eastus", "Standard_NC4as_T4_v3"),
                           ("eastus", "Standard_ND96isr_H100_v5")}
    a100 = offers[("eastus", "Standard_NC24ads_A100_v4")]
    assert (a100.gpu, a100.gpu_count, a100.price_hour, a100.spot_price_hour) == ("A100-80GB", 1, 3.673, 0.444433)
    assert offers[("eastus", "Standard_ND96isr_H100_v5")].gpu_count == 8
    # Reservation items are term totals: effective hourly = total / term hours.
    terms = {c.term_months: c for c in a100.commitments}
    assert set(terms) == {12, 36}
    assert terms[12].kind == "azure_reservation"
    assert terms[12].effective_hourly_usd == pytest.approx(0.6 * 3.673, abs=1e-6)
    assert terms[36].effective_hourly_usd == pytest.approx(0.4 * 3.673, abs=1e-6)
    assert terms[36].upfront_usd == pytest.approx(round(0.4 * 3.673 * 26280, 2))
    assert all(o.source.startswith("azure:") and o.as_of == raw.fetched_at for o in offers.values())
    # Two Consumption pages (NextPageLink followed) and one Reservation page.
    paths = [p for _m, p, _q in apis.requests]
    assert paths == ["/azure/prices", "/azure/prices/next", "/azure/prices"]


def test_lambda_needs_a_key_and_lists_types_with_capacity(apis: FakeApis, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(MissingCredentials, match="LAMBDA_API_KEY"):
        LambdaSource.from_settings(SourceSettings())
    monkeypatch.setenv("LAMBDA_API_KEY", LAMBDA_KEY)
    source = LambdaSource.from_settings(SourceSettings())
    offers = _by(source.parse(source.fetch()))
    # The 8x H100 type has no capacity now and the CPU type has no GPU: both left out.
    assert set(offers) == {("us-east-1", "gpu_1x_a10"), ("asia-northeast-1", "gpu_1x_a10"),
                           ("us-east-1", "gpu_1x_a100_sxm4")}
    a100 = offers[("us-east-1", "gpu_1x_a100_sxm4")]
    assert (a100.gpu, a100.price_hour, a100.vcpus) == ("A100", 1.99, 30)
    assert a100.ram_gb == pytest.approx(214.75, abs=0.01)  # 200 GiB, the catalog's 214.75 GB
    monkeypatch.setenv("LAMBDA_API_KEY", "wrong")
    with pytest.raises(ProviderError, match="HTTP 401"):
        LambdaSource.from_settings(SourceSettings()).fetch()


def test_runpod_prices_per_gpu_times_count_per_cloud(apis: FakeApis, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(MissingCredentials, match="RUNPOD_API_KEY"):
        RunpodSource.from_settings(SourceSettings())
    monkeypatch.setenv("RUNPOD_API_KEY", RUNPOD_KEY)
    source = RunpodSource.from_settings(SourceSettings())
    offers = _by(source.parse(source.fetch()))
    assert {t for _r, t in offers} == {
        *(f"{n}x_A100-80GB_SECURE" for n in (1, 2, 4, 8)), *(f"{n}x_A100-80GB_COMMUNITY" for n in (1, 2, 4, 8)),
        "1x_RTX4090_SECURE", "2x_RTX4090_SECURE"}  # RTX 4090 max 2; the AMD card has no specs
    eight = offers[("global", "8x_A100-80GB_SECURE")]
    assert (eight.price_hour, eight.spot_price_hour, eight.gpu_count) == (pytest.approx(8 * 1.64), pytest.approx(8 * 1.19), 8)
    assert offers[("global", "1x_A100-80GB_COMMUNITY")].spot_price_hour is None


def test_vast_keeps_the_cheapest_rentable_verified_machine(apis: FakeApis) -> None:
    source = VastSource.from_settings(SourceSettings())
    offers = _by(source.parse(source.fetch()))
    assert set(offers) == {("Georgia, US", "1x-A100"), ("Finland, FI", "2x-RTX4090")}
    assert offers[("Finland, FI", "2x-RTX4090")].price_hour == 0.79  # not the rented 0.40 nor the dearer 0.95
    assert offers[("Georgia, US", "1x-A100")].gpu_vram_gb == 40


def test_prices_refresh_updates_the_gpu_clouds_from_their_apis(apis: FakeApis, tmp_db_url: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCOST_DB_URL", tmp_db_url)
    monkeypatch.setenv("LAMBDA_API_KEY", LAMBDA_KEY)
    monkeypatch.setenv("RUNPOD_API_KEY", RUNPOD_KEY)
    # Live answers have far fewer rows than the bundled catalog (one per datacentre there): the
    # shrink guard wants that said, per provider.
    out = runner.invoke(app, ["prices", "refresh", "--provider", "azure,lambda,runpod,vast", "--force", "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert {r["provider"]: r["status"] for r in doc["results"]} == dict.fromkeys(
        ("azure", "lambda", "runpod", "vast"), "updated")
    assert doc["summary"] == {"refreshed": ["azure", "lambda", "runpod", "vast"], "skipped": {}, "failed": {}}
    listed = json.loads(runner.invoke(app, ["offers", "--provider", "azure,lambda,runpod,vast", "--json"]).stdout)
    sources = {o["provider"]: o["source"].split(":", 1)[0] for o in listed["offers"]}
    assert sources == {"azure": "azure", "lambda": "lambda", "runpod": "runpod", "vast": "vast"}
    assert all(datetime.fromisoformat(o["as_of"].replace("Z", "+00:00")) > datetime(2026, 1, 1, tzinfo=UTC)
               for o in listed["offers"])


def test_prices_refresh_says_which_were_skipped_and_exits_non_zero_when_nothing_refreshed(
    apis: FakeApis, tmp_db_url: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GPUCOST_DB_URL", tmp_db_url)
    out = runner.invoke(app, ["prices", "refresh", "--provider", "lambda,runpod", "--json"])
    assert out.exit_code == 1
    doc = json.loads(out.stdout)
    assert doc["summary"]["refreshed"] == []
    assert "LAMBDA_API_KEY is not set" in doc["summary"]["skipped"]["lambda"]
    assert "RUNPOD_API_KEY is not set" in doc["summary"]["skipped"]["runpod"]
    assert "skipped lambda (LAMBDA_API_KEY is not set" in out.stderr
    # One refreshed, one skipped: success, and the skip is still said.
    mixed = runner.invoke(app, ["prices", "refresh", "--provider", "vast,lambda", "--force"])
    assert mixed.exit_code == 0, mixed.output
    assert "refreshed: vast" in mixed.stderr and "skipped lambda" in mixed.stderr
    # A provider whose API fails is reported failed (exit 1), keeping its last prices. (A 400 is
    # not retried; a 5xx would be, with back-off, which only makes the test slower.)
    before = runner.invoke(app, ["offers", "--provider", "vast", "--json"]).stdout
    apis.fail["/vast/bundles/"] = 400
    failed = runner.invoke(app, ["prices", "refresh", "--provider", "vast", "--json"])
    assert failed.exit_code == 1
    assert "HTTP 400" in json.loads(failed.stdout)["summary"]["failed"]["vast"]
    assert runner.invoke(app, ["offers", "--provider", "vast", "--json"]).stdout == before


def test_server_errors_are_retriable_and_bad_keys_are_not(apis: FakeApis, monkeypatch: pytest.MonkeyPatch) -> None:
    apis.fail["/vast/bundles/"] = 503
    with pytest.raises(ProviderError) as exc:
        VastSource.from_settings(SourceSettings()).fetch()
    assert exc.value.retriable and "HTTP 503" in exc.value.reason
    monkeypatch.setenv("RUNPOD_API_KEY", "wrong")
    with pytest.raises(ProviderError) as bad:
        RunpodSource.from_settings(SourceSettings()).fetch()
    assert not bad.value.retriable and "refused" in bad.value.reason
    assert "wrong" not in str(bad.value)  # the key never appears in a message
