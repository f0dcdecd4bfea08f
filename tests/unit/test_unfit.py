"""Where no allowed recipe fits, option generation learns only that (``estimate.estimate_or_unfit``)
and makes no estimate: what ``estimate`` would say of it, and the same answers as with every estimate
made."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

import optimizer.candidates.estimator as cand_estimator
from optimizer.candidates.estimator import unfit_reader
from optimizer.errors import GpucostError
from optimizer.estimator.estimate import Unfit, clear_cache, estimate, estimate_or_unfit
from optimizer.estimator.gpus import all_gpus
from optimizer.estimator.workload import Constraints, Workload
from optimizer.quote import quote
from tests.unit.decide_fakes import build

NOW = datetime(2026, 12, 6, tzinfo=UTC)
WORKLOADS = [
    Workload(model="qwen2.5-7b", method="full", tokens=1e8),
    Workload(model="qwen2.5-1.5b", method="full", precision="fp32", tokens=1e8, seq_len=2048),
    Workload(model="llama-3-8b", method="lora", tokens=1e8, seq_len=4096, gradient_checkpointing=False),
    Workload(model="llama-3-8b", method="qlora", tokens=1e8, micro_batch_size=8, seq_len=4096),
    Workload(model="qwen2.5-7b", method="full", optimizer="adamw_8bit", global_batch_size=6, tokens=1e8),
    Workload(model={"params_b": 3.3, "name": "dims"}, method="full", precision="bf16", tokens=1e8,
             offload="optimizer"),
    Workload(model="vit-b-16", method="full", samples=1e6, image_size=384, global_batch_size=1024),
]
SCHEMES = [None, "ddp", "zero2", "zero3", "auto"]
COUNTS = [1, 2, 3, 4, 8, 16]


def _outcome(f: Any, *a: Any) -> Any:
    try:
        return f(*a)
    except GpucostError as exc:
        return type(exc), str(exc)


@pytest.mark.parametrize("first", ["estimate", "unfit"])
def test_unfit_is_what_estimate_says_where_nothing_fits(first: str) -> None:
    """Asked first or second (the memo then holds the estimate or the Unfit), the same figures."""
    clear_cache()
    found = fitting = 0
    for w in WORKLOADS:
        for gpu in all_gpus():
            for count in COUNTS:
                for scheme in SCHEMES:
                    a = (w, gpu.name, count, scheme)
                    if first == "estimate":
                        e, u = _outcome(estimate, *a), _outcome(estimate_or_unfit, *a)
                    else:
                        u, e = _outcome(estimate_or_unfit, *a), _outcome(estimate, *a)
                    if not isinstance(u, Unfit):
                        assert u == e, a  # the same estimate, or the same error
                        fitting += not isinstance(e, tuple) and e.fits
                        continue
                    found += 1
                    assert not isinstance(e, tuple), a
                    assert not e.fits and e.sharding == u.sharding and e.recipe == u.recipe, a
                    # Asked again, the memo's entry (now the estimate, or still the Unfit) answers alike.
                    assert estimate(*a) == e
    # Both kinds are many; where the memo holds the estimate already, it is what comes back.
    assert fitting > 300 and (found > 300 if first == "unfit" else found == 0), (found, fitting)
    # ``auto`` with several GPUs (a choice among schemes) is never Unfit.
    for w in WORKLOADS:
        assert not isinstance(estimate_or_unfit(w, "T4", 4, "auto"), Unfit)


def test_errors_are_those_of_estimate_whichever_amount_the_memo_holds() -> None:
    """An image model whose samples found nothing fitting is still refused when asked in tokens."""
    clear_cache()
    # Without checkpointing or fused attention, 65,536 patches an image keep ~100 GB of scores.
    big = Workload(model="vit-b-16", method="full", samples=1e6, image_size=4096, global_batch_size=64,
                   gradient_checkpointing=False, flash_attention=False)
    assert isinstance(estimate_or_unfit(big, "T4", 1, None), Unfit)
    in_tokens = big.model_copy(update={"samples": None, "tokens": 1e8})
    for f in (estimate, estimate_or_unfit):
        with pytest.raises(GpucostError, match="samples"):
            f(in_tokens, "T4", 1, None)
    w = WORKLOADS[0]
    for bad in ((w, "T4", 1, "ring"), (w, "T4", 0, None), (w, "no-such-gpu", 1, None)):
        assert _outcome(estimate_or_unfit, *bad) == _outcome(estimate, *bad)


def test_the_request_guard_checks_its_deadline_where_nothing_fits_too() -> None:
    """Served, the estimator is the request guard's (``guarded_estimator``): what option generation
    reads instead of an estimate stops a request past its deadline as an estimate does."""
    from service.api.limits import Ticket, WorkStopped, guarded_estimator, reset_ticket, set_ticket

    assert unfit_reader(estimate) is estimate_or_unfit
    assert unfit_reader(lambda *a: estimate(*a)) is None  # another estimator: estimates only
    ticket = Ticket.start(60)
    token = set_ticket(ticket)
    try:
        reader = unfit_reader(guarded_estimator(estimate))
        assert reader is not None and reader is not estimate_or_unfit
        assert isinstance(reader(WORKLOADS[0], "T4", 1, None), Unfit)
        ticket.cancelled.set()
        with pytest.raises(WorkStopped, match="disconnected"):
            reader(WORKLOADS[0], "T4", 1, None)
        assert unfit_reader(guarded_estimator(lambda *a: estimate(*a))) is None
    finally:
        reset_ticket(token)


BUILDS = [build("rtx4090", "RTX4090", 2500), build("2x3090", "RTX3090", 3000, count=2, ram_gb=128, cores=16)]
# (constraints, provider GPU quotas): a quota below a configuration's GPUs rejects it first.
CASES: list[tuple[Constraints, dict[str, int] | None]] = [
    (Constraints(), None), (Constraints(allow_spot=True, max_gpus=8), None), (Constraints(), {"aws": 8, "gcp": 2}),
    (Constraints(safety_margin=0.1, deadline_hours=30.0), None),
]


def _answers(offers: list[Any]) -> list[dict[str, Any]]:
    out = []
    for w in WORKLOADS:
        for c, quotas in CASES:
            clear_cache()  # every estimate made by this path, none kept from the other
            q = quote(w, c, offers, BUILDS, runs=2, top=10, prices_as_of={}, snapshot_id="ref", now=NOW,
                      quotas=quotas)
            d = q.model_dump(mode="json")
            d["solver"].pop("seconds")
            out.append(d)
    return out


@pytest.mark.python_only  # patches the shortcut out, which compiled callers call directly
def test_quotes_answer_the_same_as_with_every_estimate_made(reference_offers: list[Any], unfits_taken: list[Unfit],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    shortcut = _answers(reference_offers)
    assert len(unfits_taken) > 100  # the grid takes the shortcut often
    monkeypatch.setattr(cand_estimator, "estimate_or_unfit", estimate)
    every = _answers(reference_offers)
    for s, e in zip(shortcut, every, strict=True):
        assert s == e
    # ``estimator_calls`` counts what was read, shortcut or not; and the memory rejections are there.
    assert all(s["estimate"]["estimator_calls"] > 0 for s in shortcut)
    assert any(g["reason"] == "insufficient VRAM" for s in shortcut for g in s["rejected"])
    clear_cache()
