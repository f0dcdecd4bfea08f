"""What a card's software stack can run at all: refusals with the reason, checked before any estimate.

AMD Instinct cards train under ROCm: PyTorch, FlashAttention (ROCm port) and DeepSpeed run there,
but QLoRA's 4-bit NF4 path is bitsandbytes' CUDA kernels; bitsandbytes' ROCm backend is a preview
build outside its stable releases (bitsandbytes docs, "multi-backend" installation, 2024-2025), so
gpucost does not price a 4-bit method on an AMD card: LoRA on the 16-bit model (the cards hold 192 GB)
is the supported path.
"""

from __future__ import annotations

from optimizer.errors import InvalidInput
from optimizer.estimator.gpus import GpuSpec
from optimizer.estimator.workload import Workload


def unsupported_reason(w: Workload, gpu: GpuSpec) -> str | None:
    """Why ``w`` cannot run on ``gpu``'s software stack (None: it can)."""
    if gpu.vendor == "amd" and w.method == "qlora":
        return (f"{gpu.name} runs ROCm: QLoRA's 4-bit NF4 kernels (bitsandbytes) ship for CUDA, their ROCm "
                "backend is a preview build; use method lora (16-bit base) on this card")
    return None


def check_supported(w: Workload, gpu: GpuSpec) -> None:
    reason = unsupported_reason(w, gpu)
    if reason is not None:
        raise InvalidInput("workload.method", reason)
