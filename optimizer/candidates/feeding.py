"""Host feeding: a host with fewer cores than the data pipeline wants runs slower, it does not fail.

Option generation sizes each node's cores for a full feed (``candidates.estimator.job_host``). On a
host with fewer, the dataloader delivers ``vcpus / cores_needed`` of what the GPUs could take, so
the GPUs are busy that share of the time and training takes ``1 / share`` as long. Below the seeds'
floor (GPUs busy under ``GPU_UTIL_WARN`` = 70 % of the time) the host is rejected.

Image jobs on GPUs with a hardware JPEG decoder decode on the GPU (NVIDIA DALI's ``mixed`` decoder
on nvJPEG), which is what users of such nodes run: JPEG decoding leaves the CPU, and the cores only
read files and augment. Augmentation is kept on the CPU here (a pipeline that augments on the GPU
too needs fewer cores still), and the decoder is a unit of its own, so the GPUs' speed is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.estimator import calibration as cal

# GPUs with NVJPG hardware JPEG decoders: A100 ("Leveraging the Hardware JPEG Decoder and NVIDIA
# nvJPEG Library on NVIDIA A100 GPUs", NVIDIA technical blog, 2020), H100 (7 NVJPG units, "NVIDIA
# H100 Tensor Core GPU Architecture" whitepaper, 2022), and its successors H200 and B200 (datasheets,
# NVIDIA, 2024). Prefixes of canonical names, so every variant (PCIe, SXM, 80GB) is covered.
JPEG_DECODER_GPUS = ("A100", "A30", "H100", "H200", "GH200", "B200")


def has_jpeg_decoder(gpu: str) -> bool:
    return gpu.upper().startswith(JPEG_DECODER_GPUS)


def gpu_decode_core_share(image_size: int) -> float:
    """Share of a CPU pipeline's per-image work left on the cores when the GPU decodes the JPEGs."""
    aug = cal.AUGMENT_S_PER_IMAGE_224.value * (image_size / 224) ** 2
    return aug / (cal.JPEG_DECODE_S_PER_IMAGE.value + aug)


@dataclass(frozen=True, slots=True)
class Feed:
    """How a host of ``vcpus`` feeds a configuration that wants ``cores_needed`` per node."""

    busy_share: float  # share of the time the GPUs are fed (1.0: never starved)
    gpu_decoding: bool
    note: str


def host_feed(
    vcpus: float, cores_needed: float, *, images: bool, gpu: str, image_size: int
) -> Feed | None:
    """The feed of a CPU-short host; None when it keeps the GPUs busy under the 70 % floor."""
    decoding = images and has_jpeg_decoder(gpu)
    need = cores_needed * gpu_decode_core_share(image_size) if decoding else cores_needed
    share = min(1.0, vcpus / need) if need > 0 else 1.0
    if share < cal.GPU_UTIL_WARN.value - 1e-9:
        return None
    how = "GPU JPEG decoding (DALI/nvJPEG) and " if decoding else ""
    if share >= 1.0:
        note = (f"host feeding: {vcpus:g} vCPUs per node keep the GPUs fed with GPU JPEG decoding "
                f"(DALI/nvJPEG); decoding on the CPU would want {cores_needed:g}")
    else:
        note = (f"host feeding: {vcpus:g} vCPUs per node ({how}CPU workers) keep the GPUs busy about "
                f"{share:.0%} of the time (a full feed wants {need:.0f}), so training takes {1 / share:.2f}x as long")
    return Feed(share, decoding, note)
