"""GCP adapter with fake clients that return google-cloud-compute / billing message objects."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions as gexc
from google.cloud import billing_v1, compute_v1

from pricing.adapters.gcp import GcpSource, host_types_for
from pricing.errors import MissingCredentials, ProviderError
from pricing.source import SourceSettings

API = Path(__file__).parents[1] / "data" / "api"


def _load(name: str) -> dict[str, Any]:
    return json.loads((API / name).read_text())


class FakeAggregatedClient:
    """Walks the pages like the real AggregatedListPager: (scope, scoped list) pairs."""

    def __init__(self, pages: list[dict[str, Any]], scoped_cls: type) -> None:
        self.pages = pages
        self.scoped_cls = scoped_cls
        self.requests: list[dict[str, Any]] = []

    def aggregated_list(self, request: dict[str, Any]) -> Iterator[tuple[str, Any]]:
        self.requests.append(request)
        for page in self.pages:
            for scope, body in page["items"].items():
                yield scope, self.scoped_cls.from_json(json.dumps(body), ignore_unknown_fields=True)


class FakeCatalogClient:
    def __init__(self, skus: list[dict[str, Any]], error: Exception | None = None) -> None:
        self.skus = [billing_v1.Sku.from_json(json.dumps(s), ignore_unknown_fields=True) for s in skus]
        self.error = error

    def list_skus(self, request: dict[str, Any]) -> Iterator[billing_v1.Sku]:
        assert request["parent"] == "services/6F81-5844-456A"
        if self.error:
            raise self.error
        yield from self.skus


def _source(error: Exception | None = None, regions=("us-central1", "europe-west4")) -> GcpSource:
    skus = _load("gcp_billing_catalog_skus_a100_a2_opencost.json")["skus"]
    skus += _load("gcp_billing_catalog_skus_n1_t4_built.json")["skus"]
    return GcpSource(
        "demo-project",
        regions,
        FakeAggregatedClient(
            _load("gcp_compute_accelerator_types_aggregated_built.json")["pages"],
            compute_v1.AcceleratorTypesScopedList,
        ),
        FakeAggregatedClient(
            _load("gcp_compute_machine_types_aggregated_built.json")["pages"],
            compute_v1.MachineTypesScopedList,
        ),
        FakeCatalogClient(skus, error),
    )


def test_a2_priced_from_real_skus_matches_skypilot_to_the_cent() -> None:
    source = _source()
    offers = {(o.zone, o.instance_type): o for o in source.parse(source.fetch())}
    a2 = offers[("us-central1-a", "a2-highgpu-1g")]
    # Real SKUs: 2.933908 per A100-h, 0.031611 per vCPU-h, 0.004237 per GiB-h; 12 vCPU, 85 GiB.
    assert a2.price_hour == pytest.approx(3.673385, abs=1e-6)
    # skypilot-catalog v8 gcp: 0.73948 (host) + 2.93391 (A100) = 3.67339.
    assert round(a2.price_hour, 2) == round(3.67339, 2)
    assert (a2.gpu, a2.gpu_count, a2.vcpus, a2.region) == ("A100", 1, 12, "us-central1")
    # No spot SKUs for A2 in the fixture: spot stays unknown rather than guessed.
    assert a2.spot_price_hour is None
    a2_8 = offers[("us-central1-a", "a2-highgpu-8g")]
    assert a2_8.price_hour == pytest.approx(8 * 2.933908 + 96 * 0.031611 + 680 * 0.004237, abs=1e-6)


def test_t4_attaches_to_n1_hosts_sized_per_gpu() -> None:
    source = _source()
    offers = {(o.zone, o.instance_type): o for o in source.parse(source.fetch())}
    t4 = [o for o in offers.values() if o.gpu == "T4"]
    # The fixture's zone has n1-highmem-8/16/32: each is within T4 limits for 1, 2 and 4 GPUs
    # (48 vCPUs for 1-2 GPUs, 96 for 4), and each pairing is an offer.
    assert sorted(o.instance_type for o in t4) == [
        "n1-highmem-16+1xT4", "n1-highmem-16+2xT4", "n1-highmem-16+4xT4",
        "n1-highmem-32+1xT4", "n1-highmem-32+2xT4", "n1-highmem-32+4xT4",
        "n1-highmem-8+1xT4", "n1-highmem-8+2xT4", "n1-highmem-8+4xT4",
    ]
    one = offers[("us-central1-a", "n1-highmem-8+1xT4")]
    # 0.35 (T4) + 0.473212 (n1-highmem-8: skypilot-catalog host row 0.47321).
    assert one.price_hour == pytest.approx(0.823212, abs=1e-6)
    # The T4 has a spot SKU but N1 core/RAM do not: spot needs all parts.
    assert one.spot_price_hour is None
    # The virtual workstation and committed-use T4 SKUs did not replace the on-demand rate.
    four = offers[("us-central1-a", "n1-highmem-32+4xT4")]
    assert four.price_hour == pytest.approx(4 * 0.35 + 32 * 0.031611 + 208 * 0.004237, abs=1e-6)


def test_zones_without_priced_parts_and_unconfigured_regions_are_left_out() -> None:
    source = _source()
    offers = source.parse(source.fetch())
    # europe-west4 has shapes but the fixture's SKUs are priced for Americas regions only.
    assert {o.region for o in offers} == {"us-central1"}
    only_us = _source(regions=("us-central1",))
    assert len(only_us.parse(only_us.fetch())) == len(offers)
    assert all(o.source.startswith("gcp-billing-catalog:") and o.as_of for o in offers)


def test_machine_type_request_is_filtered_to_gpu_families() -> None:
    source = _source()
    source.fetch()
    request = source.machine_client.requests[0]
    assert request["project"] == "demo-project"
    assert "a2" in request["filter"] and "n1-highmem" in request["filter"]


@pytest.mark.parametrize(
    ("error", "retriable"),
    [
        (gexc.TooManyRequests("quota"), True),
        (gexc.DeadlineExceeded("slow"), True),
        (gexc.ServiceUnavailable("down"), True),
        (gexc.PermissionDenied("no billing.viewer"), False),
    ],
)
def test_api_errors_become_provider_errors(error: Exception, retriable: bool) -> None:
    with pytest.raises(ProviderError) as err:
        _source(error).fetch()
    assert err.value.provider == "gcp"
    assert err.value.retriable is retriable


def test_from_settings_without_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    def no_credentials(*args: Any, **kwargs: Any):
        raise DefaultCredentialsError("Your default credentials were not found.")

    monkeypatch.setattr(google.auth, "default", no_credentials)
    with pytest.raises(MissingCredentials):
        GcpSource.from_settings(SourceSettings())


def test_host_pairing_rules() -> None:
    assert host_types_for("A100", 16) == ["a2-megagpu-16g"]
    assert host_types_for("H100-MEGA", 8) == ["a3-megagpu-8g"]
    assert host_types_for("L4", 2) == ["g2-standard-24"]
    # V100: up to 12 vCPUs and 78 GB per GPU; every N1 shape within that, smallest first.
    assert host_types_for("V100", 1) == [
        "n1-standard-1", "n1-highcpu-2", "n1-highmem-2", "n1-standard-2", "n1-highcpu-4",
        "n1-highmem-4", "n1-standard-4", "n1-highcpu-8", "n1-highmem-8", "n1-standard-8",
    ]
    assert "n1-highmem-96" in host_types_for("V100", 8)
    assert "n1-highmem-64" not in host_types_for("T4", 1)  # T4: 48 vCPUs for one GPU
    assert host_types_for("K80", 1) == []
