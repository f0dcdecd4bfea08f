"""Host side of a training machine: RAM, CPU cores, disk, and whether the data pipeline keeps up.

The seeds' balancing rules made quantitative:

* RAM: at least 32 GB; loading a checkpoint briefly holds about its size per process;
  the tokenized dataset is memory-mapped (page cache); each dataloader worker holds ~0.5 GB.
* CPU: dataloader workers ~ 75% of the cores; each core tokenizes/collates a known number of
  tokens per second, so ``cores * 0.75 * rate / tokens_per_second`` is the share of time the GPUs
  can be fed: the predicted GPU utilization (warn below 70%).
* Disk: raw dataset + tokenized copy + model files + two checkpoints + environment; the disk's
  read rate against the pipeline's demand.
* Images: each core decodes JPEGs and augments them at a measured rate; the cores given are the
  ones that keep the GPUs at least 70% busy (the seeds' target), which is what a host check needs.
* Offload: the offloaded optimizer states (and weights) live in host RAM, and DeepSpeed's CPU-Adam
  wants its own cores per GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from optimizer.estimator import calibration as cal
from optimizer.estimator.construct import constructed
from optimizer.estimator.memory import MemoryParts
from optimizer.estimator.ranges import rounded
from optimizer.estimator.shapes import ModelShape
from optimizer.results import HostNeeds
from optimizer.estimator.workload import Workload

GB = 1e9
DiskKind = Literal["nvme", "sata", "hdd"]
WORKER_RAM_GB = 0.5
SYSTEM_RAM_GB = 4.0  # OS, Python, CUDA host allocations
ENVIRONMENT_DISK_GB = 30.0  # OS image, CUDA, PyTorch wheels, pip/hub caches
TOKEN_ID_BYTES = 4  # int32 token ids in the tokenized cache (Arrow / numpy)


IMAGE_FILE_BYTES = 110e3  # ImageNet-1k: ~140 GB for 1.28M JPEGs


# Its own __init__, which runs compiled (``optimizer.native``: a generated one would not).
@dataclass(slots=True, init=False)
class HostDetail:
    needs: HostNeeds
    ram_parts_gb: dict[str, float]
    disk_parts_gb: dict[str, float]
    dataloader_workers: int
    tokens_per_second_per_node: float
    # What the data pipeline must deliver per node and what one core delivers (tokens or images).
    feed_per_second_per_node: float = 0.0
    feed_per_core: float = cal.TOKENIZE_TOKENS_PER_S_PER_CORE.value
    feed_unit: str = "tokens"
    read_bytes_per_feed: float = cal.BYTES_PER_TOKEN_TEXT.value + 4
    cores_full_feed: int = 0

    def __init__(
        self, needs: HostNeeds, ram_parts_gb: dict[str, float], disk_parts_gb: dict[str, float], dataloader_workers: int,
        tokens_per_second_per_node: float, feed_per_second_per_node: float = 0.0,
        feed_per_core: float = cal.TOKENIZE_TOKENS_PER_S_PER_CORE.value, feed_unit: str = "tokens",
        read_bytes_per_feed: float = cal.BYTES_PER_TOKEN_TEXT.value + 4, cores_full_feed: int = 0,
    ) -> None:
        self.needs = needs
        self.ram_parts_gb = ram_parts_gb
        self.disk_parts_gb = disk_parts_gb
        self.dataloader_workers = dataloader_workers
        self.tokens_per_second_per_node = tokens_per_second_per_node
        self.feed_per_second_per_node = feed_per_second_per_node
        self.feed_per_core = feed_per_core
        self.feed_unit = feed_unit
        self.read_bytes_per_feed = read_bytes_per_feed
        self.cores_full_feed = cores_full_feed

    def gpu_utilization(self, cpu_cores: float) -> float:
        """Share of time the GPUs are busy when ``cpu_cores`` feed them (1.0 = never starved)."""
        if self.feed_per_second_per_node <= 0:
            return 1.0
        supply = cpu_cores * cal.DATALOADER_CORE_SHARE.value * self.feed_per_core
        return min(1.0, supply / self.feed_per_second_per_node)


def _dataset_tokens(w: Workload) -> float:
    """Distinct tokens on disk (epochs re-read the same data)."""
    if w.dataset_tokens is not None:
        return w.dataset_tokens
    if w.dataset_samples is not None:
        return w.dataset_samples * w.seq_len
    return w.total_tokens


def _dataset_images(w: Workload) -> float:
    if w.dataset_samples is not None:
        return w.dataset_samples
    if w.samples is not None:
        return w.samples
    return cal.DEFAULT_IMAGES.value


# Beyond this the tokenized dataset streams from disk instead of staying in the page cache.
DATASET_CACHE_CAP_GB = 64.0


def dataset_gb(shape: ModelShape, w: Workload) -> tuple[float, float]:
    """(tokenized copy, raw files) of ``w``'s dataset in GB: what the amount of training changes on
    a host (``optimizer.estimator.amounts`` moves kept estimates to another amount with it)."""
    if shape.is_vision:
        raw = w.dataset_gb if w.dataset_gb is not None else _dataset_images(w) * IMAGE_FILE_BYTES / GB
        return 0.0, raw
    tokens = _dataset_tokens(w)
    raw = w.dataset_gb if w.dataset_gb is not None else tokens * cal.BYTES_PER_TOKEN_TEXT.value / GB
    return tokens * TOKEN_ID_BYTES / GB, raw


def with_dataset(
    ram_parts: dict[str, float], disk_parts: dict[str, float], cache_gb: float, raw_gb: float
) -> tuple[dict[str, float], dict[str, float]]:
    """A host's RAM and disk parts with the dataset of ``dataset_gb``: ``host_needs`` builds its
    parts with this, and a kept estimate's parts move to another amount with it (same order, so the
    same sums)."""
    ram = {**ram_parts, "dataset_cache": min(cache_gb, DATASET_CACHE_CAP_GB)}
    disk = {**disk_parts, "dataset_raw": raw_gb, "dataset_tokenized": cache_gb}
    return ram, disk


def disk_total_gb(disk_parts: dict[str, float]) -> float:
    """The disk a host needs, as ``HostNeeds.disk_gb`` shows it."""
    return rounded(sum(disk_parts.values()), 1)


def needs_of(ram_parts: dict[str, float], cpu_cores: int, disk_parts: dict[str, float]) -> HostNeeds:
    """What a host needs from its RAM and disk parts: ``host_needs`` sums them with this, and an
    estimate moved to another amount of training sums its moved parts with it (``amounts.at_amount``)."""
    ram = max(cal.RAM_FLOOR_GB.value, sum(ram_parts.values()))
    return constructed(HostNeeds, ram_gb=rounded(ram, 1), cpu_cores=cpu_cores, disk_gb=disk_total_gb(disk_parts))


def workers_needed(tokens_per_second: float) -> int:
    """Dataloader workers that tokenize/collate fast enough for the GPUs."""
    return max(1, math.ceil(tokens_per_second / cal.TOKENIZE_TOKENS_PER_S_PER_CORE.value))


def images_per_second_per_core(image_size: int) -> float:
    """JPEG decode plus augmentation (RandomResizedCrop, flip) on one core."""
    aug = cal.AUGMENT_S_PER_IMAGE_224.value * (image_size / 224) ** 2
    return 1.0 / (cal.JPEG_DECODE_S_PER_IMAGE.value + aug)


def predicted_gpu_utilization(tokens_per_second: float, cpu_cores: float) -> float:
    """Share of time the GPUs are busy when ``cpu_cores`` feed them text (1.0 = never starved)."""
    if tokens_per_second <= 0:
        return 1.0
    supply = cpu_cores * cal.DATALOADER_CORE_SHARE.value * cal.TOKENIZE_TOKENS_PER_S_PER_CORE.value
    return min(1.0, supply / tokens_per_second)


def disk_read_share(tokens_per_second: float, disk: DiskKind = "nvme", bytes_per_token: float | None = None) -> float:
    """Share of the disk's sequential read rate the pipeline needs (raw text + token ids)."""
    per = bytes_per_token if bytes_per_token is not None else cal.BYTES_PER_TOKEN_TEXT.value + TOKEN_ID_BYTES
    return tokens_per_second * per / (cal.DISK_READ_GBS[disk].value * GB)


def host_needs(
    shape: ModelShape,
    w: Workload,
    mem: MemoryParts,
    gpu_count: int,
    tokens_per_second: float,
    sharding: str = "ddp",
    samples_per_second: float | None = None,
) -> HostDetail:
    """RAM, cores and disk for one node (up to 8 GPUs; larger jobs repeat it per node)."""
    gpus_node = min(gpu_count, 8)
    tps_node = tokens_per_second * gpus_node / gpu_count
    if shape.is_vision:
        ips_node = (samples_per_second or 0.0) * gpus_node / gpu_count
        per_core = images_per_second_per_core(w.image_size)
        workers = max(gpus_node, math.ceil(ips_node / per_core))
        # Enough cores to keep the GPUs >= 70% busy; the full feed needs workers / share cores.
        cores = max(4, math.ceil(cal.GPU_UTIL_WARN.value * ips_node / per_core / cal.DATALOADER_CORE_SHARE.value))
        cores_full = max(4, math.ceil(workers / cal.DATALOADER_CORE_SHARE.value))
        feed, feed_unit, read_per = ips_node, "images", IMAGE_FILE_BYTES
    else:
        workers = max(gpus_node, workers_needed(tps_node))
        cores = cores_full = max(4, math.ceil(workers / cal.DATALOADER_CORE_SHARE.value))
        per_core = cal.TOKENIZE_TOKENS_PER_S_PER_CORE.value
        feed, feed_unit, read_per = tps_node, "tokens", cal.BYTES_PER_TOKEN_TEXT.value + TOKEN_ID_BYTES
    if w.offload != "none":
        # DeepSpeed's CPU-Adam wants its own cores per GPU.
        cores = max(cores, math.ceil(gpus_node * cal.OFFLOAD_CORES_PER_GPU.value))
    parts, disk, needs = _host_parts(shape, w, mem, gpu_count, workers, cores)
    return HostDetail(
        needs=needs,
        ram_parts_gb=parts,
        disk_parts_gb=disk,
        dataloader_workers=workers,
        tokens_per_second_per_node=tps_node,
        feed_per_second_per_node=feed,
        feed_per_core=per_core,
        feed_unit=feed_unit,
        read_bytes_per_feed=read_per,
        cores_full_feed=cores_full,
    )


# ``_host_parts`` of the last workloads asked. A host's RAM and disk parts follow from the job, the
# GPU count and the dataloader workers, not from the card: a quote sizes the host of some 130 (card,
# count) pairs, and the cards of one count share one recipe and memory model (the same objects), so
# most of them find their parts here. Keyed by those objects' ids; an entry holds the objects, so
# an id reused after one is freed never hits. The parts are shared between estimates, read only.
_HOST_PARTS: dict[tuple[int, int, int, int, int, int], tuple[object, ...]] = {}
_HOST_PARTS_MAX = 1024


def forget_host_parts() -> None:
    """Forget the kept host parts (``estimate.clear_cache``: calibration constants changed)."""
    _HOST_PARTS.clear()


def _host_parts(shape: ModelShape, w: Workload, mem: MemoryParts, gpu_count: int, workers: int,
                cores: int) -> tuple[dict[str, float], dict[str, float], HostNeeds]:
    key = (id(shape), id(w), id(mem), gpu_count, workers, cores)
    hit = _HOST_PARTS.get(key)
    if hit is not None and hit[0] is shape and hit[1] is w and hit[2] is mem:
        return hit[3], hit[4], hit[5]  # type: ignore[return-value]
    gpus_node = min(gpu_count, 8)
    load_bytes = shape.params * (4.0 if w.precision in ("fp32", "tf32") else 2.0)
    # Sharded safetensors checkpoints are memory-mapped and moved to the GPU tensor by tensor
    # (transformers' low_cpu_mem_usage path, the default with accelerate), so each process holds
    # about one copy of the checkpoint in RAM while loading, not the two of a torch.load round trip.
    loading = 1.0 * load_bytes * gpus_node / GB
    if mem.stage >= 3 and gpu_count > 1:
        # FSDP / ZeRO-3 load on rank 0 only and broadcast shard by shard (accelerate
        # ``fsdp_cpu_ram_efficient_loading``, DeepSpeed ``zero.Init``): one copy per node, and for
        # QLoRA that copy is the quantized model (16-bit shards are quantized as they load).
        if w.method == "qlora":
            nf4_b = cal.NF4_BYTES_PER_PARAM.value + cal.NF4_DQ_CONSTANTS_BYTES_PER_PARAM.value
            load_bytes = shape.linear_layer_params * nf4_b + (shape.params - shape.linear_layer_params) * 2.0
        loading = load_bytes / GB
    dataset_cache, raw_gb = dataset_gb(shape, w)
    parts = {
        "model_loading": loading,
        "dataset_cache": 0.0,  # set by ``with_dataset`` below
        "dataloader_workers": workers * WORKER_RAM_GB,
        "system": SYSTEM_RAM_GB,
    }
    if mem.host_activations:
        # Checkpointing "offload": every process's checkpointed block inputs, pinned in host RAM.
        parts["offloaded_activations"] = mem.host_activations * gpus_node / GB
    if w.offload != "none":
        # Each process keeps its partition of the fp32 master copy, states and gradients (and the
        # weights) in pinned host memory.
        parts["offloaded_states"] = mem.host_offload * gpus_node / GB

    # A checkpoint holds 16-bit weights and the whole optimizer state (gathered from all shards
    # under ZeRO / FSDP); LoRA checkpoints hold the adapters and their Adam moments.
    sharded = gpu_count > 1 and mem.stage > 0
    ckpt_bytes = (
        mem.trainable_params * 4.0 * 3
        if w.method != "full"
        else shape.params * 2.0 + (mem.optimizer + mem.host_offload) * (gpu_count if sharded else 1)
    )
    disk = {
        "dataset_raw": 0.0,
        "dataset_tokenized": 0.0,
        "model_files": shape.params * 2.0 / GB,
        "checkpoints": 2 * ckpt_bytes / GB,
        "environment": ENVIRONMENT_DISK_GB,
    }
    parts, disk = with_dataset(parts, disk, dataset_cache, raw_gb)
    needs = needs_of(parts, cores, disk)
    if len(_HOST_PARTS) >= _HOST_PARTS_MAX:
        _HOST_PARTS.clear()
    _HOST_PARTS[key] = (shape, w, mem, parts, disk, needs)
    return parts, disk, needs


def host_notes(detail: HostDetail, cpu_cores: float | None = None, disk: DiskKind = "nvme") -> list[str]:
    """Warnings for a concrete host (``cpu_cores`` None: the recommended count)."""
    notes: list[str] = []
    cores = detail.needs.cpu_cores if cpu_cores is None else cpu_cores
    util = detail.gpu_utilization(cores)
    if util < cal.GPU_UTIL_WARN.value - 1e-9:
        fix = "pre-tokenize the dataset" if detail.feed_unit == "tokens" else "decode on the GPU (DALI)"
        notes.append(
            f"data pipeline: {cores:g} CPU cores feed ~{util:.0%} of the GPUs' {detail.feed_per_second_per_node:,.0f} "
            f"{detail.feed_unit}/s ({fix} or use >= {detail.needs.cpu_cores} cores)"
        )
    elif detail.feed_unit == "images" and util < 1.0 and cpu_cores is None:
        notes.append(
            f"data pipeline: {cores:g} CPU cores keep the GPUs ~{util:.0%} busy decoding JPEGs; "
            f"{detail.cores_full_feed} cores (or GPU decoding, DALI) feed them fully"
        )
    share = disk_read_share(detail.feed_per_second_per_node, disk, detail.read_bytes_per_feed)
    if share > 0.5:
        notes.append(f"disk: the pipeline needs {share:.0%} of a {disk} disk's read rate; use NVMe")
    return notes
