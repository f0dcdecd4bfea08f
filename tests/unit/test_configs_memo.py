"""A group's configurations kept across requests: the same quote with them kept or made anew,
never kept for another estimator, forgotten with the estimator's memos."""

from __future__ import annotations

from optimizer.candidates import cloud
from optimizer.estimator.estimate import clear_cache, estimate
from optimizer.estimator.workload import Constraints, Workload
from optimizer.quote import quote
from tests.unit.plan_workloads import bundled, served_offers


def _quote(w: Workload, c: Constraints, **kw: object) -> dict[str, object]:
    offers, builds = bundled()
    q = quote(w, c, served_offers(c), builds, prices_as_of={}, snapshot_id="t", **kw)  # type: ignore[arg-type]
    return q.model_dump(exclude={"solver": {"seconds"}})


def test_a_quote_is_the_same_with_configurations_kept_or_made_anew() -> None:
    w = Workload(model="qwen2.5-1.5b", method="lora", tokens=3e8)
    for c in (Constraints(), Constraints(allow_spot=True, deadline_hours=24.0)):
        clear_cache()
        assert len(cloud._CONFIGS) == 0
        made = _quote(w, c)
        kept_now = len(cloud._CONFIGS)
        assert kept_now > 0
        again = _quote(w, c)
        assert again == made  # estimator_calls included: the kept entries bring their estimates
        assert len(cloud._CONFIGS) == kept_now  # answered from what was kept


def test_another_estimator_neither_reads_nor_fills_the_kept_configurations() -> None:
    clear_cache()
    w = Workload(model="bert-base", method="full", tokens=1e8)
    calls: list[str] = []

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args[1])
        return estimate(*args, **kwargs)

    _quote(w, Constraints(), estimator=counting)
    assert calls and len(cloud._CONFIGS) == 0
    _quote(w, Constraints())
    assert len(cloud._CONFIGS) > 0
    calls.clear()
    _quote(w, Constraints(), estimator=counting)
    assert calls  # still asked: its answers may differ from the product's
