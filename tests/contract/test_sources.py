"""One invariant suite, subclassed per price source, and a registry test.

Each subclass runs its source's real ``parse`` on recorded or bundled data and checks what every
consumer of offers relies on: a positive price, a canonical GPU, ``as_of`` and ``source`` set,
no two offers with the same key.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, date, datetime
from pathlib import Path
from typing import ClassVar

import pytest

from optimizer.estimator.gpus import find_gpu
from optimizer.offer import LocalBuild, Offer
from pricing.source import RawSnapshot, SourceSettings, registered_sources

TESTS = Path(__file__).parents[1]
API = TESTS / "data" / "api"
CATALOG = TESTS / "data" / "reference" / "skypilot-catalog"

EXPECTED_SOURCES = {"aws", "gcp", "alibaba", "skypilot", "autodl", "local", "azure", "lambda", "runpod", "vast"}


class OfferContract:
    """Invariants of every ``Offer`` a source yields; subclasses provide ``offers``."""

    source_name: ClassVar[str]
    providers: ClassVar[set[str] | None]  # None: any lowercase provider id
    allow_unknown_gpus: ClassVar[bool] = False

    @pytest.fixture(scope="class")
    @classmethod
    def offers(cls) -> list[Offer]:
        raise NotImplementedError

    def test_yields_offers(self, offers: list[Offer]) -> None:
        assert offers and all(isinstance(o, Offer) for o in offers)

    def test_price_positive(self, offers: list[Offer]) -> None:
        for o in offers:
            assert (o.price_hour or 0) > 0 or (o.spot_price_hour or 0) > 0, o.key
            if o.price_hour is not None:
                assert o.price_hour_native and o.price_hour_native > 0

    def test_gpu_canonical(self, offers: list[Offer]) -> None:
        for o in offers:
            if self.allow_unknown_gpus and find_gpu(o.gpu) is None:
                assert o.gpu == o.gpu.upper(), o.gpu
            else:
                assert find_gpu(o.gpu) == o.gpu, o.gpu
            assert o.gpu_count > 0 and o.gpu_vram_gb > 0

    def test_as_of_and_source_set(self, offers: list[Offer]) -> None:
        for o in offers:
            assert o.as_of.tzinfo is not None
            assert o.source.strip()

    def test_no_duplicate_keys(self, offers: list[Offer]) -> None:
        keys = [o.key for o in offers]
        assert len(keys) == len(set(keys))

    def test_provider_named(self, offers: list[Offer]) -> None:
        names = {o.provider for o in offers}
        if self.providers is None:
            assert all(re.fullmatch(r"[a-z0-9][a-z0-9-]*", n) for n in names), names
        else:
            assert names <= self.providers


class TestAwsContract(OfferContract):
    source_name = "aws"
    providers = {"aws"}

    @pytest.fixture(scope="class")
    @classmethod
    def offers(cls) -> list[Offer]:
        from pricing.adapters.aws import AwsSource

        products = json.loads((API / "aws_get_products_gpu_us_east_1.json").read_text())
        spot = json.loads(
            (API / "aws_ec2_describe_spot_price_history_g6_xlarge_us_east_1_2026_flightdeck.json").read_text()
        )
        payloads = {
            "regions": {
                "us-east-1": {
                    "products": products["PriceList"],
                    "instance_types": [],
                    "spot_history": spot["SpotPriceHistory"],
                }
            }
        }
        raw = RawSnapshot("aws", datetime(2026, 10, 7, 18, tzinfo=UTC), payloads)
        return AwsSource([], None, lambda region: None).parse(raw)


class TestGcpContract(OfferContract):
    source_name = "gcp"
    providers = {"gcp"}

    @pytest.fixture(scope="class")
    @classmethod
    def offers(cls) -> list[Offer]:
        from tests.integration.test_adapter_gcp import _source

        source = _source()
        return source.parse(source.fetch())


class TestAlibabaContract(OfferContract):
    source_name = "alibaba"
    providers = {"alibaba"}

    @pytest.fixture(scope="class")
    @classmethod
    def offers(cls) -> list[Offer]:
        from pricing.adapters.alibaba import AlibabaSource
        from tests.integration.test_adapter_alibaba import FIXTURE, FakeEcsClient

        client = FakeEcsClient(FIXTURE)
        source = AlibabaSource(["cn-shanghai"], lambda region: client)
        return source.parse(source.fetch())


class TestSkypilotContract(OfferContract):
    source_name = "skypilot"
    providers = {"aws", "azure", "gcp", "lambda", "nebius", "paperspace", "runpod", "vast"}
    # GPUs gpucost has no specs for (B300, MI300X...) keep the catalog's name, upper-cased.
    allow_unknown_gpus = True

    @pytest.fixture(scope="class")
    @classmethod
    def offers(cls) -> list[Offer]:
        from pricing.adapters.skypilot_csv import SkypilotSource

        source = SkypilotSource(CATALOG, as_of=date(2025, 11, 30))
        return source.parse(source.fetch())


class TestAutodlContract(OfferContract):
    source_name = "autodl"
    # AutoDL-style rental snapshots carry several Chinese rental platforms.
    providers = None

    @pytest.fixture(scope="class")
    @classmethod
    def offers(cls) -> list[Offer]:
        from pricing.adapters.autodl import AutodlSource

        source = AutodlSource.from_settings(SourceSettings())
        return source.parse(source.fetch())


_BUILT_AT = datetime(2026, 12, 1, tzinfo=UTC)


def _built(name: str) -> dict:  # type: ignore[type-arg]
    return json.loads((API / name).read_text())


class TestAzureContract(OfferContract):
    source_name = "azure"
    providers = {"azure"}

    @pytest.fixture(scope="class")
    @classmethod
    def offers(cls) -> list[Offer]:
        from pricing.adapters.azure import azure_offers

        doc = _built("azure_retail_prices_eastus_built.json")
        items = [i for page in doc["consumption_pages"] + doc["reservation_pages"] for i in page["Items"]]
        return azure_offers({"items": items}, _BUILT_AT)


class TestLambdaContract(OfferContract):
    source_name = "lambda"
    providers = {"lambda"}

    @pytest.fixture(scope="class")
    @classmethod
    def offers(cls) -> list[Offer]:
        from pricing.adapters.lambda_cloud import lambda_offers

        return lambda_offers({"instance_types": _built("lambda_instance_types_built.json")["response"]}, _BUILT_AT)


class TestRunpodContract(OfferContract):
    source_name = "runpod"
    providers = {"runpod"}

    @pytest.fixture(scope="class")
    @classmethod
    def offers(cls) -> list[Offer]:
        from pricing.adapters.runpod import runpod_offers

        return runpod_offers({"gpu_types": _built("runpod_gpu_types_built.json")["response"]}, _BUILT_AT)


class TestVastContract(OfferContract):
    source_name = "vast"
    providers = {"vast"}

    @pytest.fixture(scope="class")
    @classmethod
    def offers(cls) -> list[Offer]:
        from pricing.adapters.vast import vast_offers

        return vast_offers({"bundles": _built("vast_bundles_built.json")["response"]}, _BUILT_AT)


class TestLocalContract:
    """Local builds are machines to buy, not hourly offers: their own invariants."""

    source_name = "local"

    @pytest.fixture(scope="class")
    @classmethod
    def builds(cls) -> list[LocalBuild]:
        from pricing.adapters.local import LocalSource

        source = LocalSource.from_settings(SourceSettings())
        return source.parse(source.fetch())

    def test_builds(self, builds: list[LocalBuild]) -> None:
        assert builds and all(isinstance(b, LocalBuild) for b in builds)
        ids = [b.id for b in builds]
        assert len(ids) == len(set(ids))
        for b in builds:
            assert b.price_usd > 0 and b.load_power_w > 0
            assert find_gpu(b.gpu) == b.gpu
            assert b.as_of.tzinfo is not None and b.source.strip()


CONTRACTS = [
    TestAwsContract, TestGcpContract, TestAlibabaContract, TestSkypilotContract,
    TestAutodlContract, TestLocalContract, TestAzureContract, TestLambdaContract, TestRunpodContract,
    TestVastContract,
]


def test_every_source_is_registered_named_and_covered() -> None:
    import pricing.adapters.alibaba  # noqa: F401
    import pricing.adapters.autodl  # noqa: F401
    import pricing.adapters.aws  # noqa: F401
    import pricing.adapters.azure  # noqa: F401
    import pricing.adapters.gcp  # noqa: F401
    import pricing.adapters.lambda_cloud  # noqa: F401
    import pricing.adapters.local  # noqa: F401
    import pricing.adapters.runpod  # noqa: F401
    import pricing.adapters.skypilot_csv  # noqa: F401
    import pricing.adapters.vast  # noqa: F401

    sources = registered_sources()
    assert set(sources) == EXPECTED_SOURCES
    for name, cls in sources.items():
        assert cls.name == name
        assert callable(cls.from_settings) and callable(cls.fetch) and callable(cls.parse)
    assert {c.source_name for c in CONTRACTS} == EXPECTED_SOURCES


def test_importing_the_adapters_package_registers_every_source() -> None:
    # A fresh interpreter: only what `import pricing.adapters` pulls in is registered.
    code = "from pricing.source import registered_sources; print(sorted(registered_sources()))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        cwd=TESTS.parent,
    ).stdout
    assert out.strip() == str(sorted(EXPECTED_SOURCES))
