"""A quote makes candidates only of the cloud rows its answer can show (``explain.answer_rows``)
and answers exactly as it does with every row made, on the reference catalog: its many regions and
zones at one price give the ties that decide which rows sort first."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

import optimizer.quote as quote_module
from optimizer.candidates import default_estimator, default_shardings, generate
from optimizer.estimator.workload import Constraints, Workload
from optimizer.explain import answer_rows
from optimizer.quote import quote
from tests.unit.decide_fakes import build

NOW = datetime(2026, 12, 6, tzinfo=UTC)
WORKLOADS = [
    Workload(model="qwen2.5-0.5b", method="lora", tokens=2e7),
    Workload(model="qwen2.5-1.5b", method="full", tokens=3e8, seq_len=1024),
]
# Many runs make the builds cheapest: every row shown a build, and rentals given way to.
CASES = [
    (Constraints(), 1),
    (Constraints(), 4000),
    (Constraints(include_local=False), 1),
    (Constraints(allow_spot=True), 1),
    (Constraints(providers=["aws"]), 1),
    (Constraints(gpus=["A100", "H100"], include_local=False), 3),
    (Constraints(deadline_hours=2.0), 1),
]
TOPS = [1, 2, 3, 5, 10, 30]
BUILDS = [build("rtx4090", "RTX4090", 2500), build("rtx3090", "RTX3090", 1500, ram_gb=32),
          build("2x4090", "RTX4090", 5200, count=2, ram_gb=128, cores=16)]


def _answer(w: Workload, c: Constraints, runs: int, top: int, offers: list[Any]) -> dict[str, Any]:
    q = quote(w, c, offers, BUILDS, runs=runs, top=top, prices_as_of={}, snapshot_id="ref", now=NOW)
    out = q.model_dump(mode="json")
    out["solver"].pop("seconds")
    return out


def _all_rows(top: int) -> None:
    return None


def test_the_answer_is_the_same_as_with_every_row_made(reference_offers: list[Any],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    asked = [(w, c, runs, top) for w in WORKLOADS for c, runs in CASES for top in TOPS]
    shown = [_answer(*a, reference_offers) for a in asked]
    monkeypatch.setattr(quote_module, "answer_rows", _all_rows)
    every = [_answer(*a, reference_offers) for a in asked]
    for a, s, e in zip(asked, shown, every, strict=True):
        assert s == e, a[1:]
    # The grid reaches both ways rows give way: all rentals shown, and all builds shown.
    kinds = [{o["kind"] for o in s["options"]} for s in shown if len(s["options"]) > 1]
    assert {"cloud"} in kinds and {"local", "cloud"} in kinds
    assert any(s["options"] and s["options"][0]["kind"] == "local" and s["options"][-1]["kind"] == "cloud"
               for s in shown)


def test_fewer_rows_than_the_answer_shows_would_change_it(reference_offers: list[Any],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The grid above can tell: with one row fewer than the top shown, some answers change."""
    asked = [(w, c, runs, top) for w in WORKLOADS[:1] for c, runs in CASES for top in TOPS]
    shown = [_answer(*a, reference_offers) for a in asked]
    monkeypatch.setattr(quote_module, "answer_rows", lambda top: max(1, top - 1))
    short = [_answer(*a, reference_offers) for a in asked]
    assert any(s != t for s, t in zip(shown, short, strict=True))


def test_a_quote_makes_only_the_rows_it_can_show(reference_offers: list[Any]) -> None:
    w = WORKLOADS[0]
    cut = generate(w, Constraints(include_local=False), reference_offers, [], top=10, estimator=default_estimator(),
                   shardings=default_shardings(), rows=answer_rows(10))
    full = generate(w, Constraints(include_local=False), reference_offers, [], top=10, estimator=default_estimator(),
                    shardings=default_shardings())
    assert answer_rows(10) <= len(cut.ranked) < len(full.ranked)
    # The same cheapest rows, in the same order; the rest left unmade.
    assert [c.key for c in cut.ranked] == [c.key for c in full.ranked][: len(cut.ranked)]
    # Rows as cheap as the last kept, within rounding, are kept too.
    last = cut.ranked[answer_rows(10) - 1].cost_usd
    assert all(c.cost_usd > last * (1 + 1e-7) for c in full.ranked[len(cut.ranked):])
