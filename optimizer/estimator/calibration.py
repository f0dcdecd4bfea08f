"""Every constant the estimators use that is not a law of arithmetic, with where it comes from.

Two kinds live here:

* **documented** figures (bytes per parameter of a format, a kernel's behaviour, a vendor's link
  speed), each with its public source;
* **fitted** figures, chosen to match the published measurements in
  ``tests/data/reference/measurement_cases.jsonl`` (and ``tests/data/measurements_extra.jsonl``,
  read with ``tests/data/measurements_adjustments.jsonl``), each naming the rows it was fitted
  on. Only a handful are fitted, on purpose: the accuracy test holds out every source in turn (``bench/estimator_accuracy.py --loso``) to show they transfer.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class Constant:
    value: float
    unit: str
    source: str
    fitted_on: tuple[str, ...] = ()


# --- memory: documented -------------------------------------------------------------------
NF4_BYTES_PER_PARAM = Constant(
    0.5, "B/param", "4-bit NormalFloat: 4 bits per weight (Dettmers et al. 2023, QLoRA, arXiv 2305.14314 s.3)"
)
NF4_CONSTANTS_BYTES_PER_PARAM = Constant(
    4 / 64, "B/param",
    "one fp32 absmax per 64-weight block = 0.5 bit/param (QLoRA s.3, 'Double Quantization')",
)
NF4_DQ_CONSTANTS_BYTES_PER_PARAM = Constant(
    (8 / 64 + 32 / (64 * 256)) / 8, "B/param",
    "double quantization: 8-bit block constants + one fp32 per 256 blocks = 0.127 bit/param (QLoRA s.3)",
)
ADAM8BIT_BYTES_PER_PARAM = Constant(
    2.0, "B/param", "bitsandbytes 8-bit Adam: two 8-bit states (Dettmers et al. 2022, arXiv 2110.02861)"
)
LOGITS_FP32_BUFFERS = Constant(
    3.0, "fp32 copies",
    "transformers ForCausalLMLoss upcasts the logits with .float(), shifts them with a contiguous "
    "fp32 copy (logits[..., :-1, :].contiguous(), transformers <= 4.47, late 2024) and "
    "cross_entropy saves fp32 log-probabilities: three fp32 buffers at the loss. Newer versions pad "
    "the labels instead of copying (two buffers); three is the conservative count, and the one "
    "Unsloth's HF+FA2 max-context table (unsloth.ai/blog/llama3-3, 2024-12-10) measured",
)

QLORA_DEQUANT_BLOCKS = Constant(
    1.0, "blocks of 16-bit weights",
    "bitsandbytes' MatMul4Bit dequantizes each 4-bit weight to a fresh 16-bit matrix for its "
    "matmul (forward and backward) and frees it; the caching allocator keeps the differently sized "
    "buffers of one block's seven linears (bitsandbytes functional.dequantize_4bit; Answer.AI "
    "'Enabling 70B Finetuning on Consumer GPUs', 2024-03-14: one layer dequantized at a time)",
)

# --- memory: fitted ---
QLORA_EXTRA_BYTES_PER_PARAM = Constant(
    0.2, "B per quantized param",
    "litgpt's published QLoRA peaks (tutorials/resource-tables.md, 2023-10-20) sit above NF4 "
    "weights + one dequantized block + activations by ~0.3 B per quantized weight; the cause is "
    "not itemised by the source, so it applies to stack litgpt only (the HF+FA2 context table of "
    "Unsloth's Llama 3.3 blog, 2024-12-10, leaves no room for it); fitted",
    fitted_on=("M021", "M022", "M025", "X001", "X002", "X004", "X005", "X008"),
)
CUDA_CONTEXT_GB = Constant(
    0.5, "GB",
    "CUDA context + kernel images with lazy module loading (CUDA >= 11.7, PyTorch 2.x): 0.3-0.6 GB. "
    "Older stacks load every kernel eagerly: 1.34 GB on a V100 (transformers model_memory_anatomy, row M019)",
)
FRAGMENTATION = Constant(
    0.05, "fraction of allocator peak",
    "PyTorch's caching allocator reserves blocks it cannot reuse exactly; nvidia-smi reads a few "
    "percent above torch.cuda.max_memory_allocated in steady training. A prior, not fitted: the "
    "published rows disagree on what they measure (allocator peak vs whole process), so fitting it "
    "would only trade one source for another",
)

ADAM_FOREACH_TEMP_COPIES = Constant(
    1.0, "state-sized buffers",
    "torch.optim.AdamW with foreach (the CUDA default) computes sqrt(v) for every parameter at once "
    "(torch/optim/adamw.py _multi_tensor_adamw: exp_avg_sq_sqrt = torch._foreach_sqrt(...)): one "
    "temporary as large as a state, alive during the step",
)
OFFLOAD_BUCKET_PARAMS = Constant(
    5e8, "elements",
    "DeepSpeed ZeRO reduce_bucket_size default (5e8): the 16-bit gradients the GPU holds while they "
    "stream to the host under offload",
)
DS_MAX_LIVE_PARAMETERS = Constant(
    1e9, "parameters",
    "DeepSpeed ZeRO-3 stage3_max_live_parameters / stage3_max_reuse_distance defaults (1e9): "
    "fetched parameters stay on the GPU while they will be reused soon",
)
OFFLOADED_CHECKPOINTS_ON_GPU = Constant(
    2.0, "block inputs",
    "offloaded checkpointing copies each block's input to host RAM asynchronously and fetches it "
    "back one block ahead of its backward: one copy in flight each way (Unsloth 'Unsloth "
    "Gradient Checkpointing', unsloth.ai/blog/long-context, 2024-04-09; host RAM = layers x "
    "tokens x hidden x 2 B as unsloth.ai/blog/llama3-3, 2024-12-10, states it)",
)
CNN_CHECKPOINT_SHARE = Constant(
    0.35, "of saved activations",
    "checkpointing a ResNet per stage (torch.utils.checkpoint.checkpoint_sequential) keeps stage "
    "inputs and recomputes one stage at a time: about a third of the saved feature maps",
)

# --- throughput -----------------------------------------------------------------------------
MATMUL_EFFICIENCY = Constant(
    0.75, "of what large GEMMs reach on the GPU's generation (GEMM_ATTAINABLE)",
    "share training matmuls sustain (smaller and odd shapes, epilogues, attention); fitted (0.78 "
    "before the Qwen Q-LoRA rows were priced as the GPTQ they ran)",
    fitted_on=(("the 90 text throughput rows: M010-M018, M091-M092, M100-M117, M120-M139, M140-M151, X009-X010, "
                "Q001-Q036"),),
)
ACTIVATION_TRAFFIC = Constant(
    8.0, "passes over the saved activations per step",
    "elementwise kernels (norms, activations, dropout, softmax, residual adds) read and write each "
    "saved activation several times in forward and backward; fitted",
    fitted_on=("the 54 text throughput rows (jointly with MATMUL_EFFICIENCY); driven by M010-M018, M120-M139",),
)
DISPATCH_S_PER_LAYER = Constant(
    0.003, "s per block per micro-step",
    "eager PyTorch launches ~100-150 kernels per block forward+backward at ~20-30 us each (autocast "
    "adds cast kernels). A prior, not fitted: only the transformers docs' micro-batch-1 rows "
    "(M011, M012, M014, M018) are launch-bound, and they agree with it",
)
DISPATCH_ADDITIVE_SHARE = Constant(
    0.1, "of the shorter of GPU time and launch time",
    "launches overlap GPU work only partly: Python, autograd and allocator time between kernels "
    "adds to the step (small models at short sequences are launch-bound). A prior, not fitted, for "
    "the reason DISPATCH_S_PER_LAYER gives; a grid fit on all rows picks the same 0.1",
)
STEP_OVERHEAD_S = Constant(
    0.0, "s per optimizer step",
    "zero_grad, gradient clipping, GradScaler, optimizer launches, logging sync each step; fitted",
    fitted_on=("the 54 text throughput rows (jointly); the fit is 0: launch time and the update traffic cover it",),
)
CONV_EFFICIENCY_SHARE = Constant(
    1.0, "of the GEMM share",
    "cuDNN implicit-GEMM convolutions against large transformer GEMMs; fitted on the image rows "
    "(the fit sits at its cap of 1.0: ResNet-50's time is mostly its feature-map traffic)",
    fitted_on=("V001-V034 (DeepLearningExamples and Lambda ResNet-50, timm ResNet-50 / ViT-B/16)",),
)
CNN_TRAFFIC = Constant(
    10.0, "passes over the saved feature maps per step",
    "batch norm, ReLU and residual adds read and write every feature map in forward and backward; "
    "fitted on the image rows",
    fitted_on=("V001-V034",),
)
WINOGRAD_MULTIPLY_SAVING = Constant(
    2.25, "x fewer multiplies",
    "3x3 stride-1 convolutions on CUDA cores (fp32 on cards without TF32 tensor cores): cuDNN's "
    "Winograd algorithms (cudnnConvolutionFwdAlgo_t WINOGRAD / WINOGRAD_NONFUSED, and the "
    "backward-data and backward-filter counterparts), which cudnn.benchmark picks where they are "
    "fastest, compute F(2x2, 3x3) tiles with 16 multiplies instead of 36: 2.25x fewer (Lavin & "
    "Gray 2016, 'Fast Algorithms for Convolutional Neural Networks', arXiv 1509.09308, s.4; larger "
    "tiles save more, their transforms cost more). Tensor-core convolutions (fp16, TF32) run as "
    "implicit GEMM and keep their full count. A figure from the algorithm, not fitted",
)
NCHW_TRANSPOSES_PER_CONV = Constant(
    6.0, "feature-map transposes per convolution per training step",
    "tensor cores convolve NHWC data; given PyTorch's default NCHW layout, cuDNN transposes the "
    "input to NHWC before each convolution call and the output back after it (MosaicML Composer "
    "'Channels Last' method card, docs.mosaicml.com, read 2026-12-01, after NVIDIA's diagram: "
    "'the NCHW tensor must be transposed to NHWC before the convolution and transposed back to NCHW "
    "after'). A training step makes three calls per convolution (forward: x in, y out; data "
    "gradient: dy in, dx out; weight gradient: x and dy in): 6 transposes of maps of the "
    "convolution's input or output size, each read and written once. A count, not fitted; CUDA-core "
    "convolutions (fp32 without TF32, bf16 emulated on Volta/Turing) take NCHW natively",
)
CNN_DISPATCH_SHARE = Constant(
    0.3, "of a transformer block's launch time",
    "a bottleneck block launches ~30 kernels forward and backward (3 conv, 3 BN, 3 ReLU, add) "
    "against ~100-150 for a transformer block",
)
LORA_DISPATCH_S_PER_ADAPTER = Constant(
    0.0001, "s per adapted linear per micro-step",
    "PEFT's LoRA Linear adds dropout, lora_A, lora_B, the scaling multiply and the add to every "
    "adapted linear (peft/tuners/lora/layer.py Linear.forward): ~5 kernels forward and ~8 backward, "
    "~15 launches, a few us of host time each once autograd batches them, on top of the block's own. "
    "A prior from how it works, not fitted",
)
DP_STEP_OVERHEAD_S = Constant(
    0.006, "s per optimizer step per doubling of data-parallel GPUs",
    "data-parallel costs a step cannot hide: NCCL latency of every gradient bucket's all-reduce "
    "(ring steps grow with the GPU count), the last bucket that only starts when backward ends, and "
    "waiting for the slowest of n processes; log2(n) x this per optimizer step. Fitted on the "
    "8-GPU ResNet-50 rows (DeepLearningExamples: 6.7-7.8x on 8 GPUs; 0.006 and 0.008 fit them "
    "about equally, 0.006 keeps the A100 AMP row's published 6.72x)",
    fitted_on=("V009-V014", "V017", "V021", "V027"),
)
QLORA_DISPATCH_FACTOR = Constant(
    1.6, "x a LoRA block's launch time",
    "bitsandbytes runs a dequantize kernel and dtype casts around each of a block's 7 linears per "
    "use (forward, backward, recompute), on top of the block's ~100-150 kernels",
)
QLORA_DEQUANT_BW_SHARE = Constant(
    0.5, "of the bandwidth other elementwise kernels reach",
    "bitsandbytes' 4-bit dequantize kernel does a table lookup and a scale per weight and writes a "
    "fresh 16-bit matrix the matmul then reads, per call (forward, backward, recompute): half the "
    "streaming rate. A prior, not fitted: it was fitted (0.25) on the Qwen Q-LoRA/LoRA pairs "
    "(QwenLM/Qwen README), but those ran GPTQ through auto-gptq's PyTorch unpacking, which is now "
    "priced by its own count (GPTQ_FORWARD_DEQUANT_BYTES_PER_PARAM); no published bitsandbytes "
    "QLoRA speed row with its setup stated was found",
)
# GPTQ Int4 as Qwen's finetune.py trains it: transformers' GPTQConfig(bits=4, disable_exllama=True)
# loads auto-gptq's "cuda-old" QuantLinear with trainable=True, which turns its CUDA kernel off
# (``if trainable: _autogptq_cuda_available = False``), and any input of 128 or more tokens takes
# the PyTorch path anyway (``kernel_switch_threshold=128``): every forward unpacks the weight with
# plain PyTorch ops (AutoGPTQ/AutoGPTQ auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py, commit
# c80855e2, QuantLinear.forward, read 2026-12-01). Counted per 4-bit weight and forward call:
GPTQ_FORWARD_DEQUANT_BYTES_PER_PARAM = Constant(
    18.5, "B per weight per forward call",
    "bitwise_right_shift of the expanded int32 qweight (reads 0.5 B, writes an int32: 4 B), "
    ".to(int8) (4 + 1), bitwise_and (1 + 1), weight - zeros (1 + 1), scales * (...) to fp16 "
    "(1 + 2), torch.matmul reading the fp16 matrix (2): 18.5 B, every forward and recompute "
    "(qlinear_cuda_old.py QuantLinear.forward). Plain elementwise kernels: they stream at the rate "
    "the other elementwise kernels reach (MEMORY_BW_EFFICIENCY). A count from the code, not fitted",
)
GPTQ_BACKWARD_BYTES_PER_PARAM = Constant(
    2.0, "B per weight per backward call",
    "autograd saved the dequantized fp16 matrix for torch.matmul's input gradient, so backward "
    "reads it once and does not unpack again (qlinear_cuda_old.py: a plain torch.matmul, no "
    "custom autograd Function)",
)
GEMM_ATTAINABLE = {
    "volta": Constant(0.90, "of dense peak", "large cuBLAS fp16 GEMMs on V100 reach ~110-115 of 125 TFLOPS"),
    "turing": Constant(0.70, "of dense peak", "T4 (70 W) throttles its clocks under sustained tensor-core load"),
    "ampere": Constant(0.90, "of dense peak", "large cuBLAS bf16 GEMMs on A100 reach ~280 of 312 TFLOPS"),
    "ada": Constant(0.85, "of dense peak", "Ada cards: GEMMs near peak but power-limited in long runs"),
    "hopper": Constant(0.75, "of dense peak", "H100 SXM cuBLAS bf16 GEMMs reach ~700-750 of 989 TFLOPS"),
    "blackwell": Constant(0.75, "of dense peak", "assumed as Hopper until published training sweeps exist"),
    "cdna": Constant(
        0.45, "of dense peak",
        "AMD MI300X (CDNA 3) on the public ROCm stack trains at or below an H100 per GPU despite its "
        "1307 TFLOPS dense bf16 (SemiAnalysis 'MI300X vs H100 vs H200 Benchmark Part 1: Training', "
        "2024-12-22; Clarifai 'MI300X vs H100', 2025-11: 37-66% of H100/H200 performance): 0.45 of "
        "peak puts its sustained matmul rate at ~0.8x an H100's, inside that published range",
    ),
    "pascal": Constant(
        0.70, "of dense peak",
        "no tensor cores: cuBLAS SGEMM/HGEMM on P100/P4 reach ~70-80% of the CUDA-core peak "
        "(NVIDIA Pascal P100 whitepaper, 2016; conservative end)",
    ),
    "maxwell": Constant(0.65, "of dense peak", "CUDA-core SGEMM on M60/M4000 (Maxwell, 2015): conservative"),
    "kepler": Constant(0.60, "of dense peak", "CUDA-core SGEMM on K80 (Kepler, boost clocks rarely held): conservative"),
    "other": Constant(
        0.40, "of dense peak",
        "an architecture with no published training sweep: a conservative share, a warning and a "
        "wide range rather than a guess between the known generations",
    ),
}
GEFORCE_GEMM_ATTAINABLE = Constant(
    1.23, "of the datasheet's dense FP32-accumulate tensor peak (GeForce cards, tensor-core matmuls)",
    "GeForce datasheets quote tensor peaks at the rated boost clock (with FP32 accumulate at half "
    "the FP16-accumulate rate, the rate PyTorch's cuBLAS calls get), and the boards run above it: "
    "in one PyTorch matmul benchmark (mli/transformers-benchmarks README, micro_bench.ipynb, 2022) "
    "an RTX 3090 Ti reaches 81 TFLOPS fp16 of its 80 (1.01) where an A100-80GB reaches 230 of 312 "
    "(0.74) and a V100 95 of 125 (0.76); the same notebook run on an RTX 4090 gives 158.6-167.1 of "
    "165.2 and on an A800-80GB PCIe 215.3 of 312 (mli/transformers-benchmarks issue #4, "
    "2023-04-13), and another PyTorch benchmark gives the 4090 168.4 fp16, 164.8 bf16 and 85.7 "
    "TF32 of 165.2 / 82.6 (zzc0721/torch-performance-test-data issue #78, 2025-10-17). This table "
    "holds datacenter Ampere at 0.90 (its large-GEMM ceiling), so GeForce cards get 0.90 x 1.01 / "
    "0.74 = 1.23 of their datasheet peak to keep the measured ratio. GeForce (consumer) cards "
    "only: the 300 W workstation RTX A6000 reaches 95 of its 150 in the same table. Tensor-core matmuls only: "
    "plain fp32 on the CUDA cores does not run above its datasheet figure (the 4090's 53.8 of 82.6 "
    "in issue #78) and keeps the generation's share. From the sources, not fitted",
)
TF32_CONV_SHARE = Constant(
    1.0, "of the TF32 tensor-core rate",
    "TF32 convolutions (fp32 storage, TF32 maths) reach the same share of their half-fp16 peak as "
    "fp16 ones; their extra cost is bytes: fp32 feature maps (priced as traffic) and, in the NCHW "
    "layout every published TF32 recipe runs, cuDNN's layout transposes (NCHW_TRANSPOSES_PER_CONV). "
    "Fitted on the TF32 ResNet-50 rows of DeepLearningExamples and of Lambda's runs "
    "(lambdal/deeplearning-benchmark, A100 / A10 / H100 / RTX 3090 / RTX 4090, 1 and 8 GPUs): the fit is 1.0, its "
    "prior, in sample and with any family left out (it was 0.5 while the transposes were not priced)",
    fitted_on=("V002", "V010", "V015", "V017", "V023", "V025", "V027", "V029", "V031", "V033"),
)
MEMORY_BW_EFFICIENCY = Constant(
    0.8, "fraction of datasheet bandwidth", "STREAM-like kernels reach ~80-90% of HBM/GDDR peak"
)
QLORA_DEQUANT_PASSES = Constant(
    3.0, "weight dequantizations per step",
    "bitsandbytes dequantizes each 4-bit weight to 16 bits for every matmul that uses it: the "
    "forward, the activation gradient in backward (frozen W has no weight gradient) and the "
    "recomputed forward of the usual checkpointed QLoRA recipe; the 16-bit copy is written and read",
)
OVERLAP_COMM = Constant(
    0.8, "fraction of gradient/parameter traffic hidden behind compute",
    "DDP bucketed all-reduce and FSDP/ZeRO-3 prefetch overlap communication with backward/forward",
)
INTER_NODE_GBS = Constant(
    25.0, "GB/s per GPU",
    "200 Gb/s InfiniBand per GPU (DGX A100 / p4d-class clusters); 8 GPUs per node",
)
PCIE_GBS = Constant(20.0, "GB/s", "PCIe 4.0 x16 all-reduce bandwidth actually reached (~20 of 32 GB/s)")
HOST_LINK_GBS = Constant(12.0, "GB/s", "pinned host<->GPU copies over PCIe 4.0 x16 per GPU (~12-25 GB/s)")
CPU_ADAM_PARAMS_PER_S_PER_CORE = Constant(
    5e7, "params/s/core",
    "DeepSpeed CPU-Adam (AVX-512, Ren et al. 2021 ZeRO-Offload, arXiv 2101.06840 s.5.1) is bound "
    "by host memory bandwidth: ~20 B moved per parameter, ~1-2 G params/s per socket",
)
OFFLOAD_CORES_PER_GPU = Constant(8.0, "cores", "host cores each GPU's CPU-Adam process gets")
DEFAULT_IMAGES = Constant(1_281_167.0, "images", "one ImageNet-1k epoch when no amount is given")
SETUP_HOURS = Constant(
    0.25, "h per run", "environment start, dataset tokenization and first compile (download counted apart)"
)
CHECKPOINT_WRITE_GBS = Constant(1.0, "GB/s", "NVMe / cloud block storage sequential write")
DOWNLOAD_GBS = Constant(0.1, "GB/s", "model download from the Hugging Face hub (~800 Mb/s)")

# --- ranges ---------------------------------------------------------------------------------
VRAM_RANGE_BASE = Constant(
    0.16, "relative half-width",
    "above the 80th percentile of the leave-one-source-FAMILY-out peak-VRAM error (13.8%, "
    "bench/estimator_accuracy.py --loso, 2026-12-01); with the per-input terms the ranges hold 83% "
    "of the left-out truths",
)
TPUT_RANGE_BASE = Constant(
    0.21, "relative half-width",
    "80th percentile of the leave-one-source-FAMILY-out throughput error (21.3%, "
    "bench/estimator_accuracy.py --loso, 2026-12-01); with the per-input terms the ranges hold ~80% "
    "of the left-out truths",
)

# --- host -----------------------------------------------------------------------------------
RAM_FLOOR_GB = Constant(32.0, "GB", "the seeds' minimum (000/001 guides): 32 GB system RAM")
TOKENIZE_TOKENS_PER_S_PER_CORE = Constant(
    250_000.0, "tokens/s/core",
    "Hugging Face fast (Rust) tokenizers: roughly 1 GB of text in ~20 s on one core "
    "(tokenizers README: 'Takes less than 20 seconds to tokenize a GB of text'), ~4 bytes/token, "
    "halved for collation/padding/augmentation in the dataloader",
)
JPEG_DECODE_S_PER_IMAGE = Constant(
    0.0050, "core-s per image",
    "Pillow(-SIMD) decode of an ImageNet-size JPEG (~110 kB, ~400x350) in a dataloader worker",
)
AUGMENT_S_PER_IMAGE_224 = Constant(
    0.0017, "core-s per image at 224 px",
    "RandomResizedCrop + flip + to-tensor at 224x224 (scales with output pixels). Together with "
    "decoding ~150 images/s per core, as NVIDIA DeepLearningExamples' DGX A100 ResNet-50 setup "
    "implies (16 workers feed one A100's 2470 images/s)",
)
DATALOADER_CORE_SHARE = Constant(0.75, "of cores", "the seeds: num_workers ~ 70-80% of cores")
GPU_UTIL_WARN = Constant(0.70, "fraction", "the seeds' goal: keep GPU utilization above 70%")
BYTES_PER_TOKEN_TEXT = Constant(4.0, "B/token", "English BPE text averages ~4 characters per token")
DISK_READ_GBS = {
    "nvme": Constant(2.0, "GB/s", "PCIe 3.0/4.0 NVMe sequential read (2-7 GB/s)"),
    "sata": Constant(0.5, "GB/s", "SATA III SSD ~550 MB/s"),
    "hdd": Constant(0.15, "GB/s", "7200 rpm HDD ~150 MB/s sequential"),
}


@contextmanager
def overridden(**values: float) -> Iterator[None]:
    """Temporarily replace fitted values (the fit and the leave-one-source-out check use it).
    Callers that cache estimates must clear their cache around it."""
    saved = {k: globals()[k] for k in values}
    try:
        for k, v in values.items():
            globals()[k] = replace(saved[k], value=float(v))
        yield
    finally:
        globals().update(saved)


def all_constants() -> dict[str, Constant]:
    """Every constant, for docs and the bench."""
    out = {k: v for k, v in globals().items() if isinstance(v, Constant)}
    out.update({f"DISK_READ_GBS[{k}]": v for k, v in DISK_READ_GBS.items()})
    out.update({f"GEMM_ATTAINABLE[{k}]": v for k, v in GEMM_ATTAINABLE.items()})
    return out
