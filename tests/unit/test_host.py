"""Host needs: RAM, CPU cores, disk, data-pipeline utilization."""

from __future__ import annotations

from optimizer.estimator.estimate import estimate
from optimizer.estimator.host import (
    disk_read_share,
    images_per_second_per_core,
    predicted_gpu_utilization,
    workers_needed,
)
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


def test_image_decoding_sets_the_cpu_cores() -> None:
    """JPEG decode + augmentation at ~150 images/s per core: one A100 training ResNet-50 at AMP
    needs a dozen or more cores to stay >= 70% busy; ten times fewer images need far fewer."""
    w = Workload(model="resnet50", precision="fp16", optimizer="sgd", micro_batch_size=256,
                 gradient_checkpointing=False, gradient_accumulation_steps=1, samples=1_281_167)
    est = estimate(w, "A100-80GB")
    feed = est.details["host_feed"]
    assert feed["unit"] == "images" and 100 < feed["per_core"] < 250
    assert est.host.cpu_cores >= 10
    assert est.host.cpu_cores * 0.75 * feed["per_core"] >= 0.7 * est.samples_per_second
    assert feed["cores_full_feed"] > est.host.cpu_cores
    slow = estimate(w, "T4")
    assert slow.host.cpu_cores < est.host.cpu_cores
    # Larger images cost more augmentation per image.
    assert images_per_second_per_core(384) < images_per_second_per_core(224)


def test_offload_puts_the_states_in_host_ram() -> None:
    """ZeRO-2 full fine-tune of a 7B model on 8 GPUs: optimizer offload moves ~16 B/param to the host."""
    w = Workload(model="llama-2-7b", method="full", micro_batch_size=1, seq_len=2048, gradient_checkpointing=True,
                 gradient_accumulation_steps=1)
    base = estimate(w, "A100-80GB", 8, "zero2")
    off = estimate(w.model_copy(update={"offload": "optimizer"}), "A100-80GB", 8, "zero2")
    assert off.memory_gb.total_per_gpu < 0.6 * base.memory_gb.total_per_gpu
    assert off.host.ram_gb > base.host.ram_gb + 90  # 6.7e9 x 16 B = 108 GB per node
    assert off.host.cpu_cores >= 8 * 8  # CPU-Adam wants its own cores per GPU
    assert any("offload" in x for x in off.warnings)
