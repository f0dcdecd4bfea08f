"""``constructed`` makes the same objects as pydantic's ``model_construct`` (the estimator uses it
for its result models), and ``replaced`` the same as ``model_copy(update=...)``; both hand models
they do not cover to pydantic itself."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field, PrivateAttr

from optimizer.estimator.construct import _plan_of, constructed, replaced
from optimizer.estimator.estimate import estimate
from optimizer.estimator.workload import Workload
from optimizer.results import Estimate, HostNeeds, MemoryBreakdown, Recipe


def _same(a: BaseModel, b: BaseModel) -> None:
    assert type(a) is type(b)
    assert list(a.__dict__.items()) == list(b.__dict__.items())  # values and field order
    assert a.model_fields_set == b.model_fields_set
    assert a.__pydantic_extra__ == b.__pydantic_extra__
    assert a.__pydantic_private__ == b.__pydantic_private__
    assert a.model_dump() == b.model_dump()
    assert a == b


def _values(m: BaseModel, leave_out: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in m.__dict__.items() if k not in leave_out}


@pytest.mark.parametrize(("gpu", "count"), [("A100", 1), ("RTX4090", 4), ("T4", 1)])
def test_the_estimators_models_are_the_same_as_model_construct_makes(gpu: str, count: int) -> None:
    est = estimate(Workload(model="qwen2.5-1.5b", method="lora", tokens=1e8), gpu, count)
    assert est.recipe is not None
    # Every field given, and only the required ones (the defaults filled in).
    for m in (est, est.memory_gb, est.host, est.recipe):
        cls = type(m)
        assert _plan_of(cls) is not None  # covered, not handed on
        defaulted = tuple(n for n, f in cls.model_fields.items() if not f.is_required())
        for values in (_values(m, ()), _values(m, defaulted)):
            _same(constructed(cls, **values), cls.model_construct(**values))


def test_a_mutable_default_is_not_shared_between_objects() -> None:
    values = _values(estimate(Workload(model="gpt2", tokens=1e7), "L4", 1), ("details", "range"))
    a, b = constructed(Estimate, **values), constructed(Estimate, **values)
    assert a.details == b.details and a.details is not b.details


def test_a_value_for_no_field_is_left_out_as_model_construct_leaves_it() -> None:
    _same(constructed(HostNeeds, ram_gb=32.0, cpu_cores=8, disk_gb=100.0, colour="red"),
          HostNeeds.model_construct(ram_gb=32.0, cpu_cores=8, disk_gb=100.0, colour="red"))


class _Aliased(BaseModel):
    size: int = Field(alias="Size")


class _Private(BaseModel):
    size: int = 1
    _seen: int = PrivateAttr(default=0)


@pytest.mark.parametrize(("cls", "values"), [(_Aliased, {"Size": 3}), (_Private, {"size": 2})])
def test_models_it_does_not_cover_are_made_by_model_construct(cls: type[BaseModel], values: dict[str, Any]) -> None:
    assert _plan_of(cls) is None
    _same(constructed(cls, **values), cls.model_construct(**values))


def test_the_result_models_are_covered() -> None:
    assert all(_plan_of(c) is not None for c in (Estimate, MemoryBreakdown, HostNeeds, Recipe))


@pytest.mark.parametrize("update", [{}, {"recipe": None}, {"fits": False, "notes": ("n",)}])
def test_replaced_is_model_copy_with_update(update: dict[str, Any]) -> None:
    est = estimate(Workload(model="qwen2.5-1.5b", method="lora", tokens=1e8), "A100", 2)
    for m in (est, constructed(Estimate, **_values(est, ("details", "range")))):
        got, want = replaced(m, **update), m.model_copy(update=update)
        _same(got, want)
        assert got is not m and got.__dict__ is not m.__dict__
        assert got.model_fields_set is not m.model_fields_set  # a copy: the original's is untouched


@pytest.mark.parametrize(("cls", "values"), [(_Aliased, {"Size": 3}), (_Private, {"size": 2})])
def test_replaced_hands_models_it_does_not_cover_to_model_copy(cls: type[BaseModel], values: dict[str, Any]) -> None:
    m = cls.model_validate(values)
    update = {"size": 9}
    _same(replaced(m, **update), m.model_copy(update=update))


class _Tail(BaseModel):
    size: int
    name: str = "n"
    tags: list[str] = Field(default_factory=list)  # a default made per object, last


class _SharedTail(BaseModel):
    size: int
    colour: str
    name: str = "n"
    count: int = 0


@pytest.mark.parametrize(("cls", "values"), [
    (_SharedTail, {"size": 1, "colour": "red"}),  # the first fields in order, shared defaults after
    (_SharedTail, {"size": 1, "colour": "red", "name": "m"}),
    (_SharedTail, {"size": 1, "colour": "red", "name": "m", "count": 2}),  # every field
    (_SharedTail, {"colour": "red", "size": 1}),  # out of order: the fields' order still
    (_SharedTail, {"size": 1, "colour": "red", "count": 2}),  # a default left out between
    (_SharedTail, {"size": 1}),  # a required field left out, as model_construct allows
    (_Tail, {"size": 1, "name": "m"}),  # a default made per object after them
    (_Tail, {"size": 1, "name": "m", "tags": ["a"]}),
])
def test_keywords_in_any_order_or_number_make_what_model_construct_makes(
    cls: type[BaseModel], values: dict[str, Any],
) -> None:
    _same(constructed(cls, **values), cls.model_construct(**values))


def test_a_default_made_per_object_stays_per_object_after_the_fields_given() -> None:
    a, b = constructed(_Tail, size=1, name="m"), constructed(_Tail, size=1, name="m")
    assert a.tags == [] and a.tags is not b.tags


def test_the_fields_given_are_those_set_and_the_callers_dict_is_not_touched() -> None:
    values = {"size": 1, "colour": "red"}
    m = constructed(_SharedTail, **values)
    assert m.model_fields_set == {"size", "colour"}
    assert values == {"size": 1, "colour": "red"}  # the defaults went into the call's own dict
    assert list(m.__dict__) == ["size", "colour", "name", "count"]


@pytest.mark.python_only  # records the estimator's calls, which compiled callers make directly
def test_the_estimator_gives_its_result_models_their_leading_fields_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """So that ``constructed`` keeps the keywords' dict: a call in another order still makes the
    same object, only slower, which no other test would notice."""
    import optimizer.estimator.estimate as est_mod
    import optimizer.estimator.host as host_mod
    import optimizer.estimator.recipe as recipe_mod
    from optimizer.estimator.construct import _covered

    seen: list[tuple[type[BaseModel], list[str]]] = []

    def recording(cls: type[BaseModel], **values: Any) -> BaseModel:
        seen.append((cls, list(values)))
        return constructed(cls, **values)

    for mod in (est_mod, host_mod, recipe_mod):
        monkeypatch.setattr(mod, "constructed", recording)
    est_mod.clear_cache()
    estimate(Workload(model="gpt2", method="full", tokens=1e7), "L4", 2)
    assert {cls for cls, _ in seen} == {Estimate, Recipe, MemoryBreakdown, HostNeeds}
    for cls, names in seen:
        # The leading fields in order, and every field left out has a shared default.
        assert names == list(cls.model_fields)[: len(names)], cls.__name__
        assert len(names) >= _covered(cls)[2], cls.__name__  # type: ignore[index]
