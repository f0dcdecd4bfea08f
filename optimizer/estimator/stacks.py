"""Training software stacks: how each changes logits memory, saved activations, memory traffic and
kernel launches relative to eager transformers.

These are priors from how the stacks work, not fits (the published rows are almost all eager
transformers, DeepSpeed, litgpt or Megatron-class); each stack widens the estimate's range.

* ``hf`` — transformers + PEFT, eager PyTorch. ``ForCausalLMLoss`` upcasts the logits with
  ``.float()`` and ``cross_entropy`` saves fp32 log-probabilities, so the loss holds the 16-bit
  logits plus two fp32 buffers of the same size; every norm, activation and residual add is its
  own kernel, each reading and writing its tensor.
* ``compiled`` — ``torch.compile`` (Inductor): pointwise chains fuse into one kernel (about half the
  memory passes), the min-cut partitioner recomputes cheap pointwise ops instead of saving them,
  the upcast and log-softmax fuse (one fp32 buffer), and far fewer kernels are launched.
* ``fused`` — Liger-Kernel / Unsloth class: fused linear cross-entropy never materialises the full
  logits (chunks of them exist at a time), fused RMSNorm / SwiGLU / RoPE kernels save and move
  less (Liger's README: ~60% less memory and ~20% more throughput for Llama-3-8B).
* ``litgpt`` — Lightning's litgpt: the LM head and loss run in 128-token chunks in the model's
  dtype (16-bit logits, 16-bit log-probabilities and their gradient), no PEFT k-bit upcast.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StackProfile:
    name: str
    activation_share: float  # saved activations relative to eager
    traffic_share: float  # elementwise memory traffic relative to eager
    dispatch_share: float  # host launch time relative to eager
    logits_fp32_buffers: float | None  # None: the stack's own rule (see logits_bytes)
    foreach_optimizer: bool  # PyTorch's foreach AdamW (state-sized temporaries at the step)
    uncertainty: float  # extra relative width of the estimate's range
    # One block's working set in backward with checkpointing, in blocks' worth of saved
    # activations: the recomputed block plus the gradients flowing through it (2); fused kernels
    # that write their gradients into the saved buffers in place hold about one.
    recompute_work: float = 2.0

    def logits_bytes(self, compute_b: float, hf_fp32_buffers: float) -> float:
        """Bytes per logit element alive at the loss (compute dtype ``compute_b`` bytes)."""
        if self.name == "hf":
            return compute_b + 4.0 * hf_fp32_buffers if compute_b != 4.0 else 4.0 * (1 + hf_fp32_buffers)
        if self.name == "compiled":
            return compute_b + 4.0 if compute_b != 4.0 else 8.0
        if self.name == "fused":
            return 0.0  # chunked: never a full tokens x vocab tensor
        return 3.0 * compute_b  # litgpt: logits, log-probabilities, their gradient in 16 bits


_PROFILES = {
    "hf": StackProfile("hf", 1.0, 1.0, 1.0, None, True, 0.0),
    "compiled": StackProfile("compiled", 0.9, 0.5, 0.4, 1.0, True, 0.08),
    # Unsloth's SwiGLU / LoRA-MLP backward kernels overwrite the saved gate/up buffers with their
    # gradients (unsloth/kernels/swiglu.py, "store ... in place"), so recomputation holds ~one block.
    "fused": StackProfile("fused", 0.85, 0.7, 0.7, 0.0, True, 0.10, recompute_work=1.0),
    "litgpt": StackProfile("litgpt", 1.0, 1.0, 1.0, None, True, 0.03),
}


def stack_profile(stack: str) -> StackProfile:
    return _PROFILES[stack]


def loss_logits_bytes(prof: StackProfile, cross_entropy: str, compute_b: float, hf_fp32_buffers: float) -> float:
    """Bytes per logit element alive at the loss, for ``workload.cross_entropy``.

    ``auto``: the stack's rule (``StackProfile.logits_bytes``). ``eager``: transformers'
    ``ForCausalLMLoss`` on any stack (the hf rule). ``fused``: a fused cross-entropy kernel
    (flash-attn's ``flash_attn.losses.cross_entropy.CrossEntropyLoss``, which llm-foundry's MPT uses
    by default) upcasts in registers: it saves the logits in their dtype plus one fp32 value per row
    and writes a gradient of the logits' dtype (over them only with ``inplace_backward``, off by
    default), so logits and gradient are what is alive, no fp32 copy. A fused *linear*
    cross-entropy (the ``fused`` stack's) holds less: its rule, whichever is smaller."""
    if cross_entropy == "eager":
        return _PROFILES["hf"].logits_bytes(compute_b, hf_fp32_buffers)
    if cross_entropy == "fused":
        return min(2.0 * compute_b, prof.logits_bytes(compute_b, hf_fp32_buffers))
    return prof.logits_bytes(compute_b, hf_fp32_buffers)
