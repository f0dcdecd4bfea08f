"""Recipe fitting: micro-batch by binary search, accumulation making up the global batch,
checkpointing only where needed or faster, explicit values kept, suggestions verified."""

from __future__ import annotations

import pytest

from optimizer.estimator.memo import LruMemo

from optimizer.estimator import estimate as est_mod
from optimizer.estimator import recipe as rcp
from optimizer.estimator.estimate import estimate
from optimizer.estimator.workload import Workload

QLORA = Workload(model="llama-3-8b", method="qlora", tokens=1e8)


def test_divisors() -> None:
    assert rcp.divisors(1) == [1]
    assert rcp.divisors(16) == [1, 2, 4, 8, 16]
    assert rcp.divisors(18) == [1, 2, 3, 6, 9, 18]
    assert rcp.divisors(7) == [1, 7]


@pytest.mark.parametrize("limit", [0, 1, 3, 7, 8, 100, 4096])
def test_largest_fitting_is_a_binary_search(limit: int) -> None:
    calls: list[int] = []

    def fits(m: int) -> bool:
        calls.append(m)
        return m <= limit

    cands = list(range(1, 4097))
    assert rcp.largest_fitting(cands, fits) == (min(limit, 4096) or None)
    assert len(calls) <= 13  # log2(4096) + 1, not 4096 estimates


def test_non_divisible_global_batch_is_rounded_up_and_said() -> None:
    t = rcp.concrete(QLORA, 3, "zero2", 6, False)
    assert t.recipe.global_batch_size == 18 and t.recipe.requested_global_batch_size == 16
    assert t.recipe.gradient_accumulation_steps == 1
    assert any("3 GPUs do not divide 16" in n for n in t.recipe.notes)
    exact = rcp.concrete(QLORA, 2, "zero2", 4, False)
    assert exact.recipe.global_batch_size == 16 and exact.recipe.gradient_accumulation_steps == 2
    assert exact.recipe.notes == ()


@pytest.mark.parametrize("gpu,count", [("RTX4090", 1), ("RTX3090", 2), ("A100-80GB", 1), ("T4", 1), ("A100", 8)])
def test_auto_recipe_fits_and_makes_up_the_global_batch(gpu: str, count: int) -> None:
    e = estimate(QLORA, gpu, count)
    r = e.recipe
    assert r is not None and e.fits
    assert r.micro_batch_size * r.gradient_accumulation_steps * r.data_parallel_gpus == r.global_batch_size
    assert r.global_batch_size >= 16 and r.data_parallel_gpus == count
    # precision "auto" (CONTRACT v3) is chosen per option too: fp16 on the T4 (Turing), bf16 elsewhere.
    assert set(r.chosen) == {"micro_batch_size", "gradient_checkpointing", "gradient_accumulation_steps", "precision"}
    assert r.precision == ("fp16" if gpu == "T4" else "bf16")
    # The largest micro-batch that fits: the next divisor up (same checkpointing) does not.
    share = rcp.per_gpu_share(16, count)
    larger = [d for d in rcp.divisors(share) if d > r.micro_batch_size]
    if larger:
        bigger = estimate(QLORA.model_copy(update={"micro_batch_size": larger[0],
                                                   "gradient_checkpointing": r.gradient_checkpointing}), gpu, count,
                          e.sharding)
        assert not bigger.fits


def test_checkpointing_only_where_needed_or_faster() -> None:
    e = estimate(QLORA, "A100-80GB")
    assert e.recipe is not None and not e.recipe.gradient_checkpointing  # the whole batch fits without it
    small = estimate(QLORA, "RTX3060")
    assert small.fits and small.recipe is not None
    if small.recipe.gradient_checkpointing:
        # Chosen because without it no micro-batch fits, or the one that does is slower.
        off = estimate(QLORA.model_copy(update={"gradient_checkpointing": False}), "RTX3060")
        assert not off.fits or off.tokens_per_second <= small.tokens_per_second


def test_small_micro_batches_run_at_lower_mfu() -> None:
    one = estimate(QLORA.model_copy(update={"micro_batch_size": 1, "gradient_checkpointing": False}), "A100-80GB")
    many = estimate(QLORA.model_copy(update={"micro_batch_size": 8, "gradient_checkpointing": False}), "A100-80GB")
    assert one.recipe is not None and one.recipe.gradient_accumulation_steps == 16
    assert one.mfu < many.mfu and one.hours > many.hours


def test_explicit_values_are_kept() -> None:
    w = QLORA.model_copy(update={"micro_batch_size": 8, "gradient_checkpointing": False})
    for gpu in ("RTX4090", "A100-80GB"):
        e = estimate(w, gpu)
        assert e.recipe is not None
        assert (e.recipe.micro_batch_size, e.recipe.gradient_checkpointing) == (8, False)
        assert e.recipe.chosen == ("gradient_accumulation_steps", "precision")
    pinned = estimate(w.model_copy(update={"precision": "bf16"}), "A100-80GB")
    assert pinned.recipe is not None and pinned.recipe.chosen == ("gradient_accumulation_steps",)
    assert pinned.recipe.precision == "bf16"
    assert not estimate(w, "RTX4090").fits  # kept even though it does not fit
    big = estimate(w.model_copy(update={"global_batch_size": 4}), "A100-80GB")
    assert big.recipe is not None and big.recipe.global_batch_size == 8 and big.recipe.notes


def test_suggestions_are_verified_and_only_when_nothing_fits() -> None:
    w = QLORA.model_copy(update={"micro_batch_size": 8, "gradient_checkpointing": False})
    e = estimate(w, "RTX4090", suggest=True)
    assert not e.fits and e.suggestions
    assert any("micro-batch" in s.text for s in e.suggestions)
    for s in e.suggestions:
        changes = dict(s.changes)
        n = changes.pop("gpu_count", 1)
        again = estimate(w.model_copy(update=changes), "RTX4090", n, changes.get("sharding"))
        assert again.fits and again.memory_gb.total_per_gpu == pytest.approx(s.total_per_gpu_gb)
    full = estimate(Workload(model="llama-3-8b", method="full", tokens=1e8), "A100-80GB", suggest=True)
    assert not full.fits
    texts = " | ".join(s.text for s in full.suggestions)
    assert "QLoRA" in texts and "ZeRO-3 over" in texts
    assert estimate(QLORA, "A100-80GB", suggest=True).suggestions == ()


def test_recipe_search_is_memoised_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # Searches are shared by workloads that differ only in their amount (``_TRIALS``): one an
    # earlier test ran for another token count on a 24 GB card would make the L4 estimate below
    # at that amount, moved on every read (``at_amount``), never the same object twice. Start clean.
    est_mod.clear_cache()
    monkeypatch.setattr(est_mod, "_FITTED", LruMemo(3))
    for i in range(5):
        estimate(QLORA.model_copy(update={"tokens": 1e8 + i}), "RTX4090")
        assert len(est_mod._FITTED) <= 3
    first = estimate(QLORA, "L4")
    assert estimate(QLORA, "L4") is first


@pytest.mark.parametrize("a,b", [("RTX4090", "A100-80GB"), ("L4", "H100"), ("T4", "V100")])
def test_memory_depends_on_the_card_only_through_its_attention_kernel(a: str, b: str) -> None:
    """What lets the recipe search share peak-memory figures between card types."""
    from optimizer.estimator.gpus import gpu_spec
    from optimizer.estimator.memory import fused_attention_available, memory_parts
    from optimizer.estimator.shapes import resolve_model

    for w in (QLORA.model_copy(update={"micro_batch_size": 2, "gradient_checkpointing": False}),
              Workload(model="bert-base", micro_batch_size=16, gradient_checkpointing=True, precision="fp16")):
        shape = resolve_model(w.model)
        ga, gb = gpu_spec(a), gpu_spec(b)
        if fused_attention_available(ga, w, shape.attn_head_dim) == fused_attention_available(gb, w, shape.attn_head_dim):
            for n, sh in ((1, "ddp"), (4, "zero3")):
                assert memory_parts(shape, w, ga, n, sh).total == memory_parts(shape, w, gb, n, sh).total
