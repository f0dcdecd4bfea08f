"""Host needs: RAM, CPU cores, disk, data-pipeline utilization."""

from __future__ import annotations

from optimizer.estimator.estimate import estimate
from optimizer.estimator.host import disk_read_share, predicted_gpu_utilization, workers_needed
from optimizer.estimator.workload import Workload


def test_ram_floor_and_growth_with_model() -> None:
    small = estimate(Workload(model="bert-base", tokens=1e7), "RTX4090")
    assert small.host.ram_gb == 32.0  # the seeds' 32 GB minimum
    big = estimate(Workload(model="llama-3-8b", method="lora", tokens=1e7), "A100-80GB", 8, "ddp")
    # Eight processes each hold the 16 GB checkpoint while loading it.
    assert big.host.ram_gb > 8 * 16


def test_a_7b_qlora_box_needs_the_seeds_32_gb() -> None:
    """Seed tier A (RTX 3090/4090 + 32 GB RAM) is sized for 7B-8B LoRA/QLoRA."""
    est = estimate(Workload(model="llama-3-8b", method="qlora", tokens=1e8), "RTX4090")
    assert est.host.ram_gb == 32.0


def test_cores_follow_token_rate() -> None:
    assert workers_needed(1_000.0) == 1
    assert workers_needed(1_000_000.0) > workers_needed(100_000.0)


def test_gpu_utilization_warning_when_cpu_starved() -> None:
    assert predicted_gpu_utilization(10_000.0, 8) == 1.0
    assert predicted_gpu_utilization(2_000_000.0, 2) < 0.7
    est = estimate(Workload(model="bert-base", micro_batch_size=64, seq_len=128, precision="fp16"), "H100", 8, "ddp")
    needed = est.host.cpu_cores
    assert predicted_gpu_utilization(est.tokens_per_second, needed) >= 0.7
    assert predicted_gpu_utilization(est.tokens_per_second, 1) < predicted_gpu_utilization(est.tokens_per_second, needed)


def test_disk_holds_data_model_checkpoints() -> None:
    est = estimate(Workload(model="llama-3-8b", method="full", dataset_tokens=1e9, epochs=3), "H100", 8)
    parts = est.details["host_disk_parts_gb"]
    assert parts["dataset_raw"] == 4.0  # 1e9 tokens x 4 bytes of text; epochs re-read it
    assert parts["model_files"] > 16
    assert parts["checkpoints"] > parts["model_files"]  # full checkpoints carry optimizer states
    assert est.host.disk_gb >= sum(parts.values()) - 0.1


def test_hdd_cannot_feed_fast_pipeline() -> None:
    assert disk_read_share(50_000_000.0, "hdd") > 1.0
    assert disk_read_share(50_000.0, "nvme") < 0.01
