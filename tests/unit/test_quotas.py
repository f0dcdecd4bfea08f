"""Quotas as data (optimizer.quotas), the user's quota file, and the AWS / GCP readers
(pricing.quotas) on botocore's Stubber and on fake Compute clients."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from optimizer.errors import InvalidInput, MissingCredentials, ProviderError
from optimizer.quotas import (
    AWS_G_ON_DEMAND,
    AWS_G_SPOT,
    AWS_P_ON_DEMAND,
    AWS_P_SPOT,
    QuotaBook,
    QuotaLimit,
    aws_quota_code,
    quota_state,
    short_reason,
)
from pricing.quotas.aws import AwsQuotaReader
from pricing.quotas.file import load_quota_file, parse_quota_text
from pricing.quotas.gcp import GcpQuotaReader

DATA = Path(__file__).resolve().parents[1] / "data" / "quotas"
P96 = QuotaBook([QuotaLimit("aws", "us-east-1", AWS_P_ON_DEMAND, 96)])


def test_codes_from_the_mapping_and_the_family_rule() -> None:
    assert aws_quota_code("p4d.24xlarge", spot=False) == AWS_P_ON_DEMAND
    assert aws_quota_code("p4d.24xlarge", spot=True) == AWS_P_SPOT
    assert aws_quota_code("g5.xlarge", spot=False) == AWS_G_ON_DEMAND
    # Newer than the mapping: by family.
    assert aws_quota_code("g6e.12xlarge", spot=True) == AWS_G_SPOT
    assert aws_quota_code("p5.48xlarge", spot=False) == AWS_P_ON_DEMAND
    assert aws_quota_code("m5.large", spot=False) is None


def _state(itype: str, nodes: int, book: QuotaBook, provider: str = "aws", region: str = "us-east-1",
           gpu: str = "A100", gpn: float = 8, spot: bool = False, vcpus: float | None = 96) -> tuple[str, dict[str, Any]]:
    return quota_state(provider, region, itype, gpu, gpn, nodes, spot, vcpus, book)


def test_p_family_96_vcpus_one_p4d_ok_two_short_gcp_unknown() -> None:
    assert _state("p4d.24xlarge", 1, P96) == ("ok", {
        "code": AWS_P_ON_DEMAND, "region": "us-east-1", "need": 96, "limit": 96, "unit": "vCPUs", "source": ""})
    state, detail = _state("p4d.24xlarge", 2, P96)
    assert state == "short" and (detail["code"], detail["need"], detail["limit"]) == (AWS_P_ON_DEMAND, 192, 96)
    assert AWS_P_ON_DEMAND in short_reason(detail) and "192" in short_reason(detail)
    # Spot draws on another code: no data for it.
    assert _state("p4d.24xlarge", 1, P96, spot=True)[0] == "unknown"
    # Another region: no data.
    assert _state("p4d.24xlarge", 1, P96, region="us-west-2")[0] == "unknown"
    assert _state("a2-highgpu-8g", 1, P96, provider="gcp", region="us-central1")[0] == "unknown"


def test_never_ok_without_data() -> None:
    empty = QuotaBook()
    for provider, itype in (("aws", "p4d.24xlarge"), ("gcp", "a2-highgpu-1g"), ("lambda", "gpu_1x_a100")):
        state, detail = _state(itype, 1, empty, provider=provider)
        assert state == "unknown" and detail["limit"] is None
    # No vCPU count for an AWS offer: the need is unknown, so is the state.
    assert _state("p4d.24xlarge", 1, P96, vcpus=None)[0] == "unknown"


def test_gcp_regional_metric_and_all_regions() -> None:
    book = QuotaBook([
        QuotaLimit("gcp", "us-central1", "NVIDIA_A100_GPUS", 16),
        QuotaLimit("gcp", "global", "GPUS_ALL_REGIONS", 8),
    ])
    assert _state("a2-highgpu-8g", 1, book, provider="gcp", region="us-central1")[0] == "ok"
    state, detail = _state("a2-highgpu-8g", 2, book, provider="gcp", region="us-central1")
    assert state == "short" and detail["code"] == "GPUS_ALL_REGIONS" and detail["unit"] == "GPUs"
    pre = _state("a2-highgpu-8g", 1, book, provider="gcp", region="us-central1", spot=True)
    assert pre[0] == "unknown" and pre[1]["code"] == "PREEMPTIBLE_NVIDIA_A100_GPUS"


def test_quota_files_yaml_and_csv_agree(tmp_path: Path) -> None:
    y = load_quota_file(DATA / "p_family_96.yaml")
    c = load_quota_file(DATA / "p_family_96.csv")
    assert [(q.provider, q.region, q.code, q.limit) for q in y] == [("aws", "us-east-1", AWS_P_ON_DEMAND, 96.0)]
    assert [(q.provider, q.region, q.code, q.limit) for q in c] == [(q.provider, q.region, q.code, q.limit) for q in y]
    assert y[0].source.startswith("file:")
    # A later book entry (the file) overrides a fetched one.
    book = QuotaBook([QuotaLimit("aws", "us-east-1", AWS_P_ON_DEMAND, 1000, source="aws-service-quotas"), *y])
    assert book.get("aws", "us-east-1", AWS_P_ON_DEMAND).limit == 96  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("q.yaml", "- {provider: aws, region: us-east-1, code: L-1}\n", "row 1: missing limit"),
        ("q.yaml", "- {provider: aws, region: us-east-1, code: L-1, limit: lots}\n", "not a number"),
        ("q.yaml", "- {provider: aws, region: us-east-1, code: L-1, limit: -1}\n", ">= 0"),
        ("q.yaml", "provider: aws\n", "expected a list"),
        ("q.yaml", "- [unclosed\n", "not YAML"),
        ("q.csv", "provider,region,code,limit\naws,us-east-1,,5\n", "line 2: missing code"),
    ],
)
def test_bad_quota_files_name_the_file_and_row(name: str, text: str, says: str) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_quota_text(text, name)
    assert err.value.field == "GPUCOST_QUOTAS" and name in err.value.reason and says in err.value.reason


def test_missing_quota_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="cannot read .*nope.yaml"):
        load_quota_file(tmp_path / "nope.yaml")


def _quotas_client() -> Any:
    return boto3.client("service-quotas", region_name="us-east-1", aws_access_key_id="testing",
                        aws_secret_access_key="testing")


def test_aws_reader_on_stubber_reads_applied_and_default_values() -> None:
    client = _quotas_client()
    recorded = json.loads((DATA / "aws_get_service_quota_p_on_demand.json").read_text())
    with Stubber(client) as stub:
        stub.add_response("get_service_quota", recorded, {"ServiceCode": "ec2", "QuotaCode": AWS_P_ON_DEMAND})
        # No applied value: the reader asks for AWS's default.
        stub.add_client_error("get_service_quota", service_error_code="NoSuchResourceException",
                              http_status_code=404, expected_params={"ServiceCode": "ec2", "QuotaCode": AWS_P_SPOT})
        stub.add_response(
            "get_aws_default_service_quota",
            {"Quota": {"ServiceCode": "ec2", "QuotaCode": AWS_P_SPOT, "QuotaName": "All P Spot Instance Requests",
                       "Value": 0.0}},
            {"ServiceCode": "ec2", "QuotaCode": AWS_P_SPOT},
        )
        # A code unknown in this region on both calls: skipped, the others kept.
        stub.add_client_error("get_service_quota", service_error_code="NoSuchResourceException", http_status_code=404)
        stub.add_client_error("get_aws_default_service_quota", service_error_code="NoSuchResourceException",
                              http_status_code=404)
        got = AwsQuotaReader({"us-east-1": client}, [AWS_P_ON_DEMAND, AWS_P_SPOT, "L-00000000"]).read()
        stub.assert_no_pending_responses()
    assert [(q.region, q.code, q.limit, q.source) for q in got] == [
        ("us-east-1", AWS_P_ON_DEMAND, 96.0, "aws-service-quotas"),
        ("us-east-1", AWS_P_SPOT, 0.0, "aws-service-quotas:default"),
    ]
    assert got[0].name == "Running On-Demand P instances"


def test_aws_reader_maps_access_denied_to_a_provider_error() -> None:
    client = _quotas_client()
    with Stubber(client) as stub:
        stub.add_client_error("get_service_quota", service_error_code="AccessDeniedException", http_status_code=403)
        with pytest.raises(ProviderError, match="AccessDeniedException") as err:
            AwsQuotaReader({"us-east-1": client}, [AWS_P_ON_DEMAND]).read()
    assert not isinstance(err.value, MissingCredentials)


def test_aws_reader_without_credentials_is_skipped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(MissingCredentials):
        AwsQuotaReader.from_settings(SimpleNamespace(aws_regions=("us-east-1",)))


class _FakeRegions:
    def __init__(self, by_region: dict[str, list[Any]]) -> None:
        self.by_region = by_region
        self.calls: list[tuple[str, str]] = []

    def get(self, *, project: str, region: str) -> Any:
        self.calls.append((project, region))
        return SimpleNamespace(quotas=self.by_region[region])


class _FakeProjects:
    def __init__(self, quotas: list[Any]) -> None:
        self.quotas = quotas

    def get(self, *, project: str) -> Any:
        return SimpleNamespace(quotas=self.quotas)


def _q(metric: str, limit: float, usage: float = 0.0) -> Any:
    return SimpleNamespace(metric=metric, limit=limit, usage=usage)


def test_gcp_reader_keeps_gpu_metrics_of_each_region_and_the_project() -> None:
    regions = _FakeRegions({
        "us-central1": [_q("CPUS", 24), _q("NVIDIA_A100_GPUS", 16), _q("PREEMPTIBLE_NVIDIA_A100_GPUS", 8)],
        "europe-west4": [_q("NVIDIA_T4_GPUS", 4, usage=1)],
    })
    projects = _FakeProjects([_q("GPUS_ALL_REGIONS", 12), _q("FIREWALLS", 200)])
    got = GcpQuotaReader("proj", ("us-central1", "europe-west4"), regions, projects).read()
    assert regions.calls == [("proj", "us-central1"), ("proj", "europe-west4")]
    assert {(q.region, q.code, q.limit) for q in got} == {
        ("us-central1", "NVIDIA_A100_GPUS", 16.0), ("us-central1", "PREEMPTIBLE_NVIDIA_A100_GPUS", 8.0),
        ("europe-west4", "NVIDIA_T4_GPUS", 4.0), ("global", "GPUS_ALL_REGIONS", 12.0),
    }


def test_gcp_reader_translates_api_errors() -> None:
    from google.api_core import exceptions as gexc

    class Denied:
        def get(self, **_: Any) -> Any:
            raise gexc.Forbidden("compute.regions.get denied")

    with pytest.raises(ProviderError, match="compute.regions.get denied"):
        GcpQuotaReader("proj", ("us-central1",), Denied(), _FakeProjects([])).read()
