"""SkyPilot catalog import on the real catalog files copied to tests/data/reference/skypilot-catalog."""

from __future__ import annotations

import csv
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from pricing.adapters.skypilot_csv import SkypilotSource, load_skypilot, load_skypilot_report
from pricing.errors import MissingCredentials
from pricing.source import SourceSettings

CATALOG = Path(__file__).parents[1] / "data" / "reference" / "skypilot-catalog"
CLOUDS = ["aws", "azure", "gcp", "lambda", "nebius", "paperspace", "runpod", "vast"]

@pytest.fixture(scope="module")
def imported():
    return load_skypilot_report(CATALOG, as_of=date(2025, 11, 30))


def _csv_rows(cloud: str) -> list[dict[str, str]]:
    with open(CATALOG / cloud / "vms.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_every_row_of_every_cloud_is_loaded_or_skipped_with_a_reason(imported) -> None:
    offers, report = imported
    assert sorted(report.clouds) == CLOUDS  # common/ has no vms.csv and is skipped
    for cloud in CLOUDS:
        rep = report.clouds[cloud]
        assert rep.rows == len(_csv_rows(cloud))
        assert rep.loaded_rows + sum(rep.skipped.values()) == rep.rows, cloud
        assert rep.loaded_rows > 0 and rep.offers == sum(o.provider == cloud for o in offers)
    assert all(o.source == f"skypilot-catalog:{o.provider}/vms.csv" for o in offers)
    assert all(o.as_of == datetime(2025, 11, 30, tzinfo=UTC) for o in offers)


def test_cheapest_a100_x8_is_the_cheapest_matching_csv_row(imported) -> None:
    offers, _ = imported
    a100x8 = sorted(
        (o for o in offers if o.gpu == "A100" and o.gpu_count == 8 and o.price_hour),
        key=lambda o: o.price_hour,
    )
    csv_prices = [
        float(r["Price"])
        for cloud in CLOUDS
        if cloud != "gcp"  # GCP's A100 rows are accelerators alone; priced with hosts below
        for r in _csv_rows(cloud)
        if r["AcceleratorName"] == "A100"
        and r["AcceleratorCount"] and float(r["AcceleratorCount"]) == 8
        and r["Price"] not in ("", "nan")
    ]
    assert a100x8[0].price_hour == min(csv_prices)
    cheapest_gcp = min(o.price_hour for o in a100x8 if o.provider == "gcp")
    assert cheapest_gcp >= min(csv_prices)


@pytest.mark.parametrize(
    ("instance_type", "price", "spot"),
    [
        # prices-notes.md section 3, rows 13-16: host row + accelerator row, us-central1.
        ("a2-highgpu-1g", 3.67339, 1.80385),
        ("a2-ultragpu-1g", 2.94582, 2.51378),
        ("g2-standard-4", 0.70683, 0.28184),
        ("a3-highgpu-8g", 43.06615, 26.83013),
    ],
)
def test_gcp_vm_is_host_plus_accelerator_to_the_cent(imported, instance_type, price, spot) -> None:
    offers, _ = imported
    found = [o for o in offers if o.provider == "gcp" and o.region == "us-central1"
             and o.instance_type == instance_type]
    assert found
    for o in found:
        assert round(o.price_hour, 2) == round(price, 2)
        assert o.price_hour == pytest.approx(price, abs=1e-5)
        assert o.spot_price_hour == pytest.approx(spot, abs=1e-5)
        assert o.vcpus and o.ram_gb


def test_gcp_pairings(imported) -> None:
    offers, _ = imported
    gcp = [o for o in offers if o.provider == "gcp"]
    kinds = {(o.instance_type, o.gpu, o.gpu_count) for o in gcp}
    assert ("a3-megagpu-8g", "H100", 8) in kinds
    assert ("a3-ultragpu-8g", "H200", 8) in kinds
    assert ("a4-highgpu-8g", "B200", 8) in kinds  # host priced 0.0: the B200 row carries it all
    assert ("a2-megagpu-16g", "A100", 16) in kinds
    assert {("n1-highmem-8+1xT4", "T4", 1), ("n1-highmem-64+8xV100", "V100", 8)} <= kinds
    # Every N1 host within GCP's limits per GPU count is its own offer (V100: 12 vCPUs per GPU,
    # T4: 48 for one or two GPUs), so a job needing few vCPUs rents the small host.
    n1 = {(o.instance_type, o.vcpus) for o in gcp if o.instance_type.startswith("n1-")}
    assert ("n1-highmem-2+1xT4", 2) in n1 and ("n1-highmem-32+1xT4", 32) in n1
    assert ("n1-highmem-8+1xV100", 8) in n1
    assert not any(t.startswith("n1-highmem-16+1xV100") for t, _ in n1)  # over 12 vCPUs
    assert not any(t.startswith("n1-highmem-64+1xT4") for t, _ in n1)  # over 48 vCPUs
    t4 = [o for o in gcp if o.region == "us-central1" and o.zone == "us-central1-a"
          and o.instance_type.endswith("+1xT4")]
    cheapest = min(t4, key=lambda o: o.price_hour)
    assert cheapest.instance_type == "n1-highmem-2+1xT4"
    # Never an accelerator priced alone.
    assert all(o.instance_type for o in gcp)


def test_catalog_quirks(imported) -> None:
    offers, report = imported
    nd = [o for o in offers if o.instance_type == "Standard_ND96isr_H100_v5"]
    assert nd and all(o.gpu_count == 8 for o in nd)
    assert report.clouds["azure"].fixed["GPU count corrected"] == len(nd)

    l40s = [o for o in offers if o.provider == "runpod" and o.gpu == "L40S" and o.spot_price_hour]
    assert l40s and all(o.spot_price_hour < o.price_hour for o in l40s)

    assert all(o.spot_price_hour is None for o in offers if o.provider == "vast")

    g6f = [o for o in offers if o.instance_type == "g6f.2xlarge"]
    assert g6f and all(o.gpu_count == 0.25 and o.gpu_vram_gb == 6.0 for o in g6f)

    aws_zones = {o.zone for o in offers if o.provider == "aws"}
    assert all(z and "-az" in z for z in aws_zones)  # zone ids kept, not zone names

    lam = {o.instance_type: o for o in offers if o.provider == "lambda"}
    assert lam["gpu_1x_h100_pcie"].gpu == "H100-PCIE"
    assert lam["gpu_8x_a100"].gpu_vram_gb == 40  # TotalGpuMemoryInMiB is per GPU on Lambda

    b300 = [o for o in offers if o.gpu == "B300"]  # unknown to gpu_specs: kept under its own name
    assert b300 and all(o.gpu_vram_gb > 200 for o in b300)

    assert report.clouds["runpod"].skipped["duplicate row"] == 14
    assert report.clouds["lambda"].skipped["no GPU (CPU-only row)"] == 34


def test_no_duplicate_keys(imported) -> None:
    offers, _ = imported
    keys = [o.key for o in offers]
    assert len(keys) == len(set(keys))


def test_single_file_takes_its_folder_as_cloud() -> None:
    offers = load_skypilot(CATALOG / "nebius" / "vms.csv")
    assert len(offers) == 21 and {o.provider for o in offers} == {"nebius"}


def test_source_reads_settings_dir() -> None:
    with pytest.raises(MissingCredentials):
        SkypilotSource.from_settings(SourceSettings())
    source = SkypilotSource.from_settings(
        SourceSettings(skypilot_dir=str(CATALOG), extra={"skypilot_as_of": "2025-11-30"})
    )
    offers = source.parse(source.fetch())
    assert offers == load_skypilot(CATALOG, as_of=date(2025, 11, 30))


def test_rules_on_a_small_catalog(tmp_path: Path) -> None:
    # Rows written for this test (not prices of any cloud): NaN, zero and empty cells.
    folder = tmp_path / "runpod"
    folder.mkdir()
    (folder / "vms.csv").write_text(
        "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Region,SpotPrice,Price\n"
        "1x_A,A100-80GB,1.0,8.0,80.0,A100-80GB,CA,nan,2.0\n"
        "1x_B,A100-80GB,1.0,8.0,80.0,A100-80GB,US,0.0,NaN\n"
        "1x_C,L40S,1.0,8.0,80.0,L40S,US,1.5,1.0\n"
        "1x_D,GTX1660S,1.0,8.0,80.0,GTX1660S,US,,3.0\n"
    )
    offers, report = load_skypilot_report(tmp_path)
    by_type = {o.instance_type: o for o in offers}
    assert by_type["1x_A"].spot_price_hour is None and by_type["1x_A"].price_hour == 2.0
    assert (by_type["1x_C"].price_hour, by_type["1x_C"].spot_price_hour) == (1.5, 1.0)
    assert report.skipped == {"no price (empty, NaN or 0)": 1, "GPU memory unknown": 1}
