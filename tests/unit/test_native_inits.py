"""The estimator's dataclasses that write their own ``__init__`` (``optimizer.native``: compiled, it
runs as C) take exactly their fields, in order, with the same defaults, and set each one."""

from __future__ import annotations

import dataclasses
import importlib
import inspect

import pytest

from optimizer import native


def _own_inits() -> list[type]:
    found = []
    for name in native.MODULES:
        module = importlib.import_module(name)
        for obj in vars(module).values():
            if (isinstance(obj, type) and obj.__module__ == name and dataclasses.is_dataclass(obj)
                    and not obj.__dataclass_params__.init):  # type: ignore[attr-defined]
                found.append(obj)
    return found


OWN = _own_inits()


def test_the_classes_made_per_card_and_count_write_their_init() -> None:
    names = {f"{c.__module__}.{c.__qualname__}" for c in OWN}
    assert {"optimizer.estimator.throughput.Throughput", "optimizer.candidates.cloud._Config",
            "optimizer.estimator.memory.MemoryParts", "optimizer.estimator.amounts.AmountFigures",
            "optimizer.estimator.host.HostDetail", "optimizer.costs.RentCost"} <= names
    assert len(names) >= 18


# Compiled, an __init__'s signature reads (*args, **kwargs) and its arguments are checked against
# the annotations: test_native.py runs these classes compiled, and its grid their answers.
@pytest.mark.python_only
def test_an_own_init_takes_the_fields_in_order_with_their_defaults() -> None:
    for cls in OWN:
        fields = dataclasses.fields(cls)
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
        assert [p.name for p in params] == [f.name for f in fields], cls.__qualname__
        for p, f in zip(params, fields, strict=True):
            assert p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, (cls.__qualname__, f.name)
            want = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
            assert p.default == want, (cls.__qualname__, f.name)
            assert f.default_factory is dataclasses.MISSING  # an own __init__ would have to call it


@pytest.mark.python_only
def test_an_own_init_sets_every_field() -> None:
    for cls in OWN:
        fields = dataclasses.fields(cls)
        values = [object() for _ in fields]  # distinct markers: a field set from another argument shows
        assert [getattr(cls(*values), f.name) for f in fields] == values, cls.__qualname__
        by_name = cls(**{f.name: v for f, v in zip(fields, values, strict=True)})
        assert [getattr(by_name, f.name) for f in fields] == values, cls.__qualname__


@pytest.mark.python_only
def test_the_classes_that_were_frozen_still_hash_by_their_fields() -> None:
    hashed = [c for c in OWN if c.__dataclass_params__.unsafe_hash]  # type: ignore[attr-defined]
    assert len(hashed) >= 12
    for cls in hashed:
        values = [(i,) for i in range(len(dataclasses.fields(cls)))]
        assert hash(cls(*values)) == hash(cls(*values)) and cls(*values) == cls(*values), cls.__qualname__
