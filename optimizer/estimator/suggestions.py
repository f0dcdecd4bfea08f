"""What would make a job fit a GPU it does not fit: each change estimated, only those that fit kept.

Changes are tried from the least to the most intrusive: let the recipe be fitted (smaller
micro-batch, checkpointing), 8-bit Adam or pure bf16 states, offloading, a lighter method (LoRA,
QLoRA), and sharding the model over more GPUs of the same type. Each is one change from what was
asked, so the user can see which single decision unblocks the job; where the user pinned a recipe
that does not fit and fitting the recipe alone does not help either, a change is also tried with
the recipe left to ``auto`` (its ``changes`` say so).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from optimizer.errors import GpucostError
from optimizer.estimator.workload import Workload
from optimizer.results import Estimate, Suggestion

FitFn = Callable[[Workload, str, int, str], Estimate]
SHARD_COUNTS = (2, 4, 8)
MAX_SUGGESTIONS = 6
_METHOD_NAMES = {"lora": "LoRA", "qlora": "QLoRA (4-bit base weights)"}


def _recipe_text(e: Estimate) -> str:
    r = e.recipe
    if r is None:
        return ""
    ckpt = "with" if r.gradient_checkpointing else "without"
    return f"micro-batch {r.micro_batch_size} x {r.gradient_accumulation_steps} accumulation {ckpt} checkpointing"


def _changes(w: Workload) -> list[tuple[str, dict[str, Any]]]:
    """(what it is called, workload fields to change) in the order they are offered."""
    out: list[tuple[str, dict[str, Any]]] = []
    if w.micro_batch_size != "auto" or w.gradient_checkpointing != "auto":
        out.append(("", {"micro_batch_size": "auto", "gradient_checkpointing": "auto"}))
    if w.optimizer == "adamw":
        out.append(("8-bit Adam", {"optimizer": "adamw_8bit"}))
    if w.method == "full" and w.precision in ("bf16", "fp16", "auto"):
        out.append(("pure bf16 (no fp32 master copy)", {"precision": "bf16-true"}))
    if "offload" in Workload.model_fields and getattr(w, "offload", "none") == "none":
        out.append(("optimizer offload to CPU", {"offload": "optimizer"}))
        out.append(("optimizer and parameter offload to CPU", {"offload": "optimizer+params"}))
    if w.method == "full":
        out.append((_METHOD_NAMES["lora"], {"method": "lora"}))
    if w.method in ("full", "lora"):
        out.append((_METHOD_NAMES["qlora"], {"method": "qlora"}))
    return out


def suggestions(w: Workload, gpu: str, gpu_count: int, sharding: str, fit: FitFn) -> list[Suggestion]:
    """Verified changes that make ``w`` fit on ``gpu`` (same count, or sharded over more)."""
    relax = {"micro_batch_size": "auto", "gradient_checkpointing": "auto"}
    pinned = w.micro_batch_size != "auto" or w.gradient_checkpointing != "auto"
    out: list[Suggestion] = []

    def attempt(name: str, update: dict[str, Any], count: int, scheme: str) -> Suggestion | None:
        try:
            changed = w.model_copy(update=update)
            e = fit(changed, gpu, count, scheme)
        except (GpucostError, ValueError):
            return None
        if not e.fits:
            return None
        recipe = _recipe_text(e)
        text = f"{recipe} fits" if not name else f"{name} fits" + (f" with {recipe}" if recipe else "")
        text += f": {e.memory_gb.total_per_gpu:.1f} GB per GPU of {e.gpu_vram_gb:g}"
        changes: dict[str, Any] = dict(update)
        if count != gpu_count:
            changes["gpu_count"] = count
        return Suggestion(text=text, changes=changes, gpu_count=count, total_per_gpu_gb=e.memory_gb.total_per_gpu,
                          hours=e.hours, recipe=e.recipe)

    recipe_alone = False

    def with_recipe(name: str, update: dict[str, Any], count: int, scheme: str) -> Suggestion | None:
        # As asked first; a pinned recipe that does not fit would sink every other change, so
        # then with the recipe fitted too, unless fitting the recipe alone already does it.
        found = attempt(name, update, count, scheme)
        if found is None and pinned and not recipe_alone:
            found = attempt(name, {**relax, **update}, count, scheme)
        return found

    for name, update in _changes(w):
        s = attempt(name, update, gpu_count, sharding) if not name else with_recipe(name, update, gpu_count, sharding)
        if s is not None:
            out.append(s)
            recipe_alone = recipe_alone or not name
    for n in SHARD_COUNTS:
        if n <= gpu_count:
            continue
        s = with_recipe(f"ZeRO-3 over {n} GPUs", {"sharding": "zero3"}, n, "zero3")
        if s is not None:
            out.append(s)
            break  # the fewest GPUs that fit; more only cost more
    return out[:MAX_SUGGESTIONS]
