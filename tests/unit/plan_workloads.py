"""Varied workloads and the bundled catalog, for the tests of the rental cost floors and of the
plan's pruned rental search: LLMs trained in full, with LoRA and QLoRA, BERT-class encoders,
ResNet and ViT, offload, checkpointing pinned on, off and left to the recipe, fixed and automatic
micro-batches, other precisions and stacks, and the amount given as tokens, samples or epochs."""

from __future__ import annotations

from functools import lru_cache

from optimizer.candidates.offer_groups import OfferIndex
from optimizer.estimator.workload import Constraints, Workload
from optimizer.offer import LocalBuild, Offer
from pricing.snapshot.loader import load_bundled

WORKLOADS: list[Workload] = [
    Workload(model="llama-3-8b", method="qlora", tokens=2e8, seq_len=2048),
    Workload(model="llama-3-8b", method="lora", tokens=5e7, gradient_checkpointing=True, micro_batch_size=2),
    Workload(model="mistral-7b", method="full", tokens=3e8, seq_len=1024),
    Workload(model="qwen2.5-7b", method="full", tokens=1e8, offload="optimizer", sharding="zero2"),
    Workload(model="qwen2.5-3b", method="full", tokens=4e8, gradient_checkpointing=False, optimizer="adamw_8bit"),
    Workload(model="qwen2.5-1.5b", method="lora", tokens=1e9, precision="fp16", stack="compiled"),
    Workload(model="qwen2.5-0.5b", method="full", tokens=2e9, stack="fused", seq_len=4096),
    Workload(model="gpt2", method="full", samples=2e6, seq_len=1024, precision="fp32"),
    Workload(model="bert-base", method="full", dataset_samples=1e6, epochs=3, seq_len=128),
    Workload(model="distilbert", method="full", tokens=5e8, global_batch_size=64),
    Workload(model="roberta-base", method="lora", tokens=3e8, lora_targets="all-linear"),
    Workload(model="resnet50", method="full", dataset_samples=1_281_167, epochs=5),
    Workload(model="resnet50", method="full", samples=5e6, image_size=160, precision="fp32"),
    Workload(model="vit-b-16", method="full", dataset_samples=1_281_167, epochs=2),
    Workload(model="vit-b-16", method="lora", samples=3e6, gradient_checkpointing=True),
    Workload(model={"params_b": 13.0}, method="qlora", tokens=1e8),
    Workload(model="qwen2.5-7b", method="full", tokens=5e7, offload="optimizer+params", sharding="zero3"),
]

# Deadlines: none, one many options meet, and one that needs several GPUs or is met by few.
DEADLINES: list[float | None] = [None, 48.0, 6.0]


@lru_cache(maxsize=1)
def bundled() -> tuple[list[Offer], list[LocalBuild]]:
    snap = load_bundled()
    return list(snap.offers), list(snap.builds)


def served_offers(constraints: Constraints) -> list[Offer]:
    """The offers the service hands a plan: the bundled catalog pruned of dominated offers."""
    return _index().view_offers(constraints)


@lru_cache(maxsize=1)
def _index() -> OfferIndex:
    return OfferIndex.build(bundled()[0])
