"""The estimator's memory and recipe-search memos (``estimate._memory``, ``estimate._TRIALS``,
``estimate._memory_view``, ``throughput.step_terms``, ``host._host_parts``): one card's memory parts
serve every card with the same attention kernel, which holds only if the memory model reads the
card through its kernel alone, every part of it (not just the total); one card's recipe search
serves every card with the same kernel whose usable memory it decides alike; an estimate made with
the memos is the one made without them."""

from __future__ import annotations

import dataclasses

import pytest

from optimizer.estimator import estimate as est_mod
from optimizer.estimator import host as host_mod
from optimizer.estimator import recipe as rcp
from optimizer.estimator import throughput as tp_mod
from optimizer.estimator.estimate import clear_cache, estimate
from optimizer.estimator.gpus import gpu_spec
from optimizer.estimator.memo import LruMemo
from optimizer.estimator.memory import fused_attention_available, memory_parts
from optimizer.estimator.precision import with_precision
from optimizer.estimator.shapes import resolve_model
from optimizer.estimator.workload import Workload

CARDS = ["A100", "A100-80GB", "H100", "L4", "RTX4090", "A10G", "T4", "V100", "RTX3090", "L40S"]
WORKLOADS = [
    Workload(model="qwen2.5-1.5b", method="lora", tokens=1e8, micro_batch_size=4, gradient_checkpointing=False,
             gradient_accumulation_steps=2, precision="bf16"),
    Workload(model="llama-3-8b", method="qlora", tokens=1e8, micro_batch_size=2, gradient_checkpointing=True,
             gradient_accumulation_steps=4, precision="fp16", seq_len=2048),
    Workload(model="bert-base", method="full", tokens=1e8, micro_batch_size=16, gradient_checkpointing=False,
             gradient_accumulation_steps=1, precision="fp32"),
    Workload(model="qwen2.5-7b", method="full", tokens=1e8, micro_batch_size=1, gradient_checkpointing="offload",
             gradient_accumulation_steps=8, precision="bf16", offload="optimizer"),
    Workload(model="vit-b-16", method="full", samples=1e6, micro_batch_size=32, gradient_checkpointing=False,
             gradient_accumulation_steps=1, precision="fp16"),
]


@pytest.mark.parametrize("w", WORKLOADS, ids=lambda w: f"{w.model}-{w.method}")
def test_every_memory_part_depends_on_the_card_only_through_its_attention_kernel(w: Workload) -> None:
    shape = resolve_model(w.model)
    by_kernel: dict[tuple[bool, int, str], tuple[str, object]] = {}
    compared = 0
    for name in CARDS:
        gpu = gpu_spec(name)
        fused = fused_attention_available(gpu, w, shape.attn_head_dim)
        for n, sharding in ((1, "ddp"), (4, "zero2"), (8, "zero3")):
            parts = dataclasses.astuple(memory_parts(shape, w, gpu, n, sharding))
            first = by_kernel.setdefault((fused, n, sharding), (name, parts))
            assert parts == first[1], (name, first[0], n, sharding)
            compared += first[0] != name
    assert compared > 0  # several cards shared a kernel: the comparison ran


@pytest.mark.python_only  # patches or subclasses what compiled code calls directly
@pytest.mark.parametrize("gpu", ["A100", "T4", "RTX4090"])
def test_an_estimate_made_with_the_memos_is_the_one_made_without(gpu: str, monkeypatch: pytest.MonkeyPatch) -> None:
    w = Workload(model="qwen2.5-1.5b", method="lora", tokens=1e8)
    clear_cache()
    for card in CARDS:  # fill the memos from other cards first
        estimate(w, card, 2)
    with_memos = estimate(w, gpu, 2).model_dump()
    assert len(est_mod._PARTS) > 0
    assert len(est_mod._VIEWS) > 0 and len(tp_mod._STEP_TERMS) > 0 and len(host_mod._HOST_PARTS) > 0
    clear_cache()
    assert len(host_mod._HOST_PARTS) == 0  # forgotten with the other memos (calibration may change)
    monkeypatch.setattr(est_mod, "_memory", lambda shape, cw, g, n, s: memory_parts(shape, cw, g, n, s))
    monkeypatch.setattr(tp_mod, "_STEP_TERMS", _NeverKept(1))
    monkeypatch.setattr(host_mod, "_HOST_PARTS", _NeverHeld())
    made = est_mod._memory_view

    def fresh_view(shape, cw, mem):  # type: ignore[no-untyped-def]
        est_mod._VIEWS.clear()
        return made(shape, cw, mem)

    monkeypatch.setattr(est_mod, "_memory_view", fresh_view)
    assert estimate(w, gpu, 2).model_dump() == with_memos


def test_an_estimates_flops_are_its_workloads_whatever_the_card() -> None:
    """``train_flops`` is taken from the throughput's per-token figure (kept per workload,
    ``throughput.step_terms``): it must be the run's FLOPs as ``throughput.train_flops`` counts them,
    for each of several workloads estimated one after the other (nothing of one kept for another)."""
    clear_cache()
    for w in WORKLOADS:
        want = float(f"{tp_mod.train_flops(resolve_model(w.model), w):.6e}")
        for card in CARDS:
            for n in (1, 4):
                assert estimate(w, card, n).train_flops == want, (w.model, card, n)


class _NeverKept(LruMemo):  # type: ignore[type-arg]
    """A memo that computes every time."""

    def get_or_compute(self, key, compute):  # type: ignore[no-untyped-def]
        return compute()


class _NeverHeld(dict):  # type: ignore[type-arg]
    """A dict memo that never finds what was put in it."""

    def get(self, key, default=None):  # type: ignore[no-untyped-def]
        return default


# 24 GB cards (one usable memory, several kernels) and others, on a job whose recipe search has
# choices to make: auto micro-batch and checkpointing under a tight fit.
SEARCH_CARDS = ["L4", "A10G", "A10", "RTX4090", "RTX3090", "RTXA5000", "T4", "V100", "A100", "RTX4070TiSuper"]
SEARCHED = [
    Workload(model="llama-3-8b", method="qlora", tokens=1e8, seq_len=2048),
    Workload(model="qwen2.5-1.5b", method="full", tokens=1e8, seq_len=1024, global_batch_size=32),
]


@pytest.mark.python_only  # patches or subclasses what compiled code calls directly
@pytest.mark.parametrize("w", SEARCHED, ids=lambda w: f"{w.model}-{w.method}")
@pytest.mark.parametrize("count", [1, 4])
def test_a_recipe_search_shared_between_cards_gives_each_card_its_own_estimate(
    w: Workload, count: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    clear_cache()
    shared = {card: estimate(w, card, count).model_dump() for card in SEARCH_CARDS}
    # Some cards were answered from another card's search, and the recipes differ between cards
    # with different memory: the memo was read, and it is not a constant.
    assert len(est_mod._TRIALS) < len(SEARCH_CARDS)
    assert len({str(d["recipe"]) for d in shared.values()}) > 1
    clear_cache()
    monkeypatch.setattr(est_mod, "_TRIALS", _NeverKept(1))
    for card in SEARCH_CARDS:
        clear_cache()
        assert estimate(w, card, count).model_dump() == shared[card], card


def test_a_recipe_search_serves_every_usable_memory_it_decides_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_fitting_trials`` keeps a search with the range of usable memory over which its
    comparisons come out the same: over 400 card sizes, what it gives is what a search of its own
    gives each size, from a few searches, and the recipes do change over the sizes."""
    w = Workload(model="qwen2.5-1.5b", method="full", tokens=1e8, seq_len=1024, global_batch_size=32,
                 precision="bf16")
    shape, gpu = resolve_model(w.model), gpu_spec("A100")
    searches: list[tuple[object, ...]] = []
    real = rcp.fitting_trials

    def counted(*args):  # type: ignore[no-untyped-def]
        searches.append(args)
        return real(*args)

    monkeypatch.setattr(rcp, "fitting_trials", counted)
    sizes = [4.0 + 0.25 * i for i in range(400)]  # 4 to 104 GB
    alone = {}
    for u in sizes:
        clear_cache()
        alone[u] = est_mod._fitting_trials(shape, w, gpu, 1, "ddp", u)
    assert len({tuple((t.recipe.micro_batch_size, t.recipe.gradient_checkpointing) for t in alone[u]) for u in sizes}) > 3
    # Largest first (each range then met from above), smallest first, and every other size.
    for order in (sizes[::-1], sizes, sizes[::2] + sizes[1::2][::-1]):
        clear_cache()
        searches.clear()
        for u in order:
            assert est_mod._fitting_trials(shape, w, gpu, 1, "ddp", u) == alone[u], u
        assert len(searches) < len(sizes) / 10


def test_a_recipe_copy_is_keyed_from_its_workload_and_its_recipe() -> None:
    """``Workload.with_recipe``: the copy's rate key comes from its workload's and the recipe, not
    from a digest; copies of workloads that differ only in their amount share it, and no two
    recipes do."""
    a = Workload(model="qwen2.5-0.5b", method="lora", tokens=1e7)
    b = a.model_copy(update={"tokens": 5e7})
    ca, cb = a.with_recipe(4, False, 2), b.with_recipe(4, False, 2)
    assert ca.rate_key() == cb.rate_key() != a.rate_key()
    assert ca.tokens == a.tokens and cb.tokens == b.tokens
    keys = {a.with_recipe(m, c, g).rate_key() for m in (1, 2, 12) for c in (False, True, "offload") for g in (1, 2, 21)}
    assert len(keys) == 27
    # The copy is the workload with those values, and estimates as one made whole does.
    whole = Workload(**{**a.model_dump(), "micro_batch_size": 4, "gradient_checkpointing": False,
                        "gradient_accumulation_steps": 2})
    assert whole == ca and whole.rate_key() != ca.rate_key()
    clear_cache()
    assert estimate(ca, "L4").model_dump() == estimate(whole, "L4").model_dump()


def test_a_resolved_precision_is_keyed_from_its_workload() -> None:
    """``precision.with_precision``: the copy for a card's precision takes its rate key from its
    workload's and the precision, not from a digest; copies of workloads that differ only in their
    amount share it, the two precisions do not, and the copy estimates as one given that precision."""
    a = Workload(model="qwen2.5-0.5b", method="lora", tokens=1e7)
    b = a.model_copy(update={"tokens": 5e7})
    a16, b16 = with_precision(a, gpu_spec("T4")), with_precision(b, gpu_spec("V100"))
    assert (a16.precision, b16.precision, a16.tokens, b16.tokens) == ("fp16", "fp16", 1e7, 5e7)
    assert a16 is not b16 and a16.rate_key() == b16.rate_key() != a.rate_key()
    abf = with_precision(a, gpu_spec("A100"))
    assert abf.precision == "bf16" and abf.rate_key() not in (a16.rate_key(), a.rate_key())
    # A recipe's copy of the resolved copy has a key of its own too.
    assert a16.with_recipe(4, False, 2).rate_key() not in (a16.rate_key(), abf.with_recipe(4, False, 2).rate_key())
    given = a.model_copy(update={"precision": "fp16"})
    assert given == a16 and given.rate_key() != a16.rate_key()
    clear_cache()
    auto = estimate(a, "T4")
    clear_cache()
    explicit = estimate(given, "T4")
    assert auto.recipe is not None and explicit.recipe is not None
    assert auto.recipe.chosen == (*explicit.recipe.chosen, "precision")
    assert auto.model_dump(exclude={"recipe"}) == explicit.model_dump(exclude={"recipe"})


def test_cards_served_by_one_search_share_the_recipe_that_says_precision_was_chosen() -> None:
    """Under ``precision: "auto"`` every estimate's recipe lists ``precision`` as chosen; cards that
    one recipe search serves share that recipe (one copy per searched recipe, not per card)."""
    w = Workload(model="qwen2.5-0.5b", method="lora", tokens=1e7)
    clear_cache()
    ests = [estimate(w, g) for g in ("A100", "A100-80GB", "H100", "L40S", "A6000")]
    recipes = [e.recipe for e in ests]
    assert all(r is not None and r.chosen[-1] == "precision" and r.chosen.count("precision") == 1 for r in recipes)
    assert len({id(r) for r in recipes}) < len(recipes)
    for e in ests:  # the same recipe an estimate made alone, after the memos are forgotten, has
        clear_cache()
        assert estimate(w, e.gpu).model_dump() == e.model_dump()
    clear_cache()
    assert not est_mod._CHOSEN


@pytest.mark.parametrize("w", WORKLOADS, ids=lambda w: f"{w.model}-{w.method}")
def test_a_kept_per_token_floor_is_the_one_computed_for_any_amount(w: Workload) -> None:
    """The rentals' cost floors (``step_floor``) are kept per workload without its amount and card:
    another amount gets the floor computed for it, and ``clear_cache`` forgets them."""
    from optimizer.candidates import step_floor

    shape = resolve_model(w.model)
    other = w.model_copy(update={"tokens": 3e9} if w.tokens else {"samples": 5e7})
    clear_cache()
    for gpu in ("A100", "T4", "H100"):
        spec = gpu_spec(gpu)
        fresh = step_floor._floor(shape, other, spec)
        assert step_floor.gpu_seconds_per_token_floor(shape, w, spec) == fresh  # computed for ``w``
        assert step_floor.gpu_seconds_per_token_floor(shape, other, spec) == fresh  # kept: ``other`` hits it
    assert len(step_floor._FLOORS) == 3  # one entry per card, whatever the amount
    assert step_floor.gpu_seconds_per_token_floor(shape, w, gpu_spec("L4")) != step_floor._floor(shape, w, gpu_spec("T4"))
    clear_cache()
    assert len(step_floor._FLOORS) == 0
