"""How many pydantic attribute reads a quote makes, by class, field and (in Python) function.

A quote's estimator and option generation read the request's ``Workload``, the ``Estimate``s, the
``Offer``s and the answer's models through pydantic's ``BaseModel``, whose ``__getattr__`` (for
private and extra attributes) puts every read on CPython's slower attribute path: a ``Workload``
field took about 26 ns in a loop where a slotted object's took 7 ns (the thirty-third pass in
``docs/performance-distinct.md``). Build item 3 of the speed issue asks for no pydantic object per
candidate in the estimator's inner loop; this counts what such a change would take away.

In-process ``service.answers.quote_answer`` on a fresh SQLite store with the bundled snapshot, the
questions of ``bench/ab_quotes.py`` (each new: a new token count, a new model for ``model`` and
``full``). Each
kind is warmed by ``--warm`` questions, then ``--quotes`` are counted: ``BaseModel.__getattribute__``
is replaced by a counting one for the count only (a read through it is slower, so no time is
reported). ``--by-function`` also names the Python function that made each read: with the compiled
modules the reader is the nearest *Python* caller, so run it with ``GPUCOST_NATIVE=0`` for the
estimator's own functions.

Run: .venv/bin/python bench/attribute_reads.py [--kinds restricted,open,model] [--quotes 20]
         [--warm 30] [--top 12] [--by-function] [--json]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from collections.abc import Callable
from typing import Any

import ab_quotes  # bench/ is on sys.path when run as a script
from code_state import describe
from cold_quote_profile import bench_store

KINDS = ("restricted", "open", "spot", "model", "full")


class Counter:
    """Counts pydantic attribute reads while ``on``, by (class, field) and (module, function)."""

    def __init__(self, by_function: bool) -> None:
        self.on = False
        self.fields: collections.Counter[tuple[str, str]] = collections.Counter()
        self.functions: collections.Counter[tuple[str, str]] = collections.Counter()
        self.by_function = by_function

    def install(self) -> Callable[[], None]:
        """Count reads from now on (while ``on``); returns what puts pydantic back."""
        from pydantic import BaseModel

        had = "__getattribute__" in BaseModel.__dict__
        before = BaseModel.__dict__.get("__getattribute__")
        plain = object.__getattribute__
        frame = sys._getframe
        me = self

        def counting(obj: Any, name: str) -> Any:
            if me.on:
                cls = type(obj).__name__
                me.fields[(cls, name)] += 1
                if me.by_function:
                    code = frame(1).f_code
                    me.functions[(code.co_filename.rsplit("/", 1)[-1], code.co_name)] += 1
            return plain(obj, name)

        BaseModel.__getattribute__ = counting  # type: ignore[method-assign, assignment]

        def restore() -> None:
            if had:
                BaseModel.__getattribute__ = before  # type: ignore[method-assign, assignment]
            else:
                del BaseModel.__getattribute__

        return restore


def count_kind(kind: str, store: Any, counter: Counter, warm: int, quotes: int, salt: int) -> dict[str, Any]:
    """Reads per quote of ``quotes`` new questions of ``kind``, after ``warm`` others."""
    from service.answers import quote_answer
    from service.api import heap
    from service.schemas import QuoteRequest

    def ask(i: int) -> None:
        req = QuoteRequest.model_validate(ab_quotes.body(kind, i, salt))
        mark = heap.request_started()
        quote_answer(req, store)
        heap.request_ended(mark, 200)

    for i in range(warm):
        ask(i)
    counter.fields.clear()
    counter.functions.clear()
    counter.on = True
    try:
        for i in range(warm, warm + quotes):
            ask(i)
    finally:
        counter.on = False
    by_class: collections.Counter[str] = collections.Counter()
    for (cls, _), n in counter.fields.items():
        by_class[cls] += n
    return {
        "kind": kind, "quotes": quotes,
        "reads_per_quote": round(sum(counter.fields.values()) / quotes, 1),
        "by_class": {c: round(n / quotes, 1) for c, n in by_class.most_common()},
        "by_field": [[c, f, round(n / quotes, 1)] for (c, f), n in counter.fields.most_common()],
        "by_function": [[m, f, round(n / quotes, 1)] for (m, f), n in counter.functions.most_common()],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", default="restricted,open,model", help=f"comma-separated, of {', '.join(KINDS)}")
    ap.add_argument("--quotes", type=int, default=20, help="new questions counted per kind")
    ap.add_argument("--warm", type=int, default=30, help="new questions asked first per kind, not counted")
    ap.add_argument("--top", type=int, default=12, help="fields and functions shown per kind")
    ap.add_argument("--by-function", action="store_true", help="also count by the Python function that read")
    ap.add_argument("--json", action="store_true", help="one JSON document instead of the tables")
    args = ap.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        ap.error(f"--kinds: {', '.join(bad) or 'none given'}; choose from {', '.join(KINDS)}")
    if args.quotes < 1 or args.warm < 0 or args.top < 1:
        ap.error("--quotes and --top must be at least 1, --warm at least 0")
    store = bench_store("gpucost-reads-")
    counter = Counter(args.by_function)
    restore = counter.install()
    try:
        rows = [count_kind(k, store, counter, args.warm, args.quotes, salt=7 + i) for i, k in enumerate(kinds)]
    finally:
        restore()
    if args.json:
        print(json.dumps({"code": describe(), "kinds": rows}))
        return
    print(describe())
    for r in rows:
        print(f"\n{r['kind']}: {r['reads_per_quote']:,.0f} pydantic attribute reads a quote ({r['quotes']} new "
              "questions); by class: " + ", ".join(f"{c} {n:,.0f}" for c, n in list(r["by_class"].items())[:6]))
        print("| class | field | reads a quote |\n|---|---|---|")
        for c, f, n in r["by_field"][:args.top]:
            print(f"| {c} | {f} | {n:,.1f} |")
        if args.by_function:
            print("\n| module | function | reads a quote |\n|---|---|---|")
            for m, f, n in r["by_function"][:args.top]:
                print(f"| {m} | {f} | {n:,.1f} |")


if __name__ == "__main__":
    main()
