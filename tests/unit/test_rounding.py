"""``ranges.rounded`` (and ``amount_rows.rounded_all``, over a column) returns ``round``'s double,
bit for bit: on random figures of every magnitude the estimator rounds, on halves and their
neighbours (where it hands over to ``round``), signed zeros, and what ``round`` alone answers (other
digit counts, huge values, infinities, NaN)."""

from __future__ import annotations

import math
import random
import struct

import numpy as np

from optimizer.candidates.amount_rows import rounded_all
from optimizer.estimator.ranges import rounded


def _same(x: float, nd: int) -> bool:
    got, want = rounded(x, nd), float(round(x, nd))
    if math.isnan(want):
        return math.isnan(got)
    return struct.pack("<d", got) == struct.pack("<d", want)


def test_random_figures_round_as_round_does() -> None:
    rng = random.Random(20261205)
    misses = []
    for _ in range(200_000):
        nd = rng.randrange(0, 7)
        x = rng.choice((1.0, -1.0)) * 10 ** rng.uniform(-9, 13) * rng.random()
        if not _same(x, nd):
            misses.append((x, nd))
    assert misses == []


def test_halves_and_their_neighbours_round_as_round_does() -> None:
    rng = random.Random(5)
    misses = []
    for _ in range(40_000):
        nd = rng.randrange(1, 5)
        k = rng.randrange(0, 10 ** rng.randrange(1, 12))
        half = (k + 0.5) / 10**nd
        up, down = math.nextafter(half, math.inf), math.nextafter(half, -math.inf)
        for x in (half, up, down, math.nextafter(up, math.inf), math.nextafter(down, -math.inf), -half, -up):
            if not _same(x, nd):
                misses.append((x, nd))
    assert misses == []


def test_zeros_extremes_and_what_round_alone_answers() -> None:
    values = [0.0, -0.0, 5e-324, -5e-324, 1e-300, -0.0004, 0.0004, -0.00005, 0.5, 1.5, 2.5, -2.5, 0.125,
              0.00049999999999999, 2.675, 1.005, 4503599627370496.0 / 1000, 1e16, -1e16, 1e308,
              math.inf, -math.inf, math.nan, 123456.789, -987.6545]
    for x in values:
        for nd in range(8):
            assert _same(x, nd), (x, nd)
    assert math.copysign(1.0, rounded(-0.0004, 3)) == -1.0  # round keeps the sign of a zero it rounds to


def _same_all(xs: list[float], nd: int) -> list[tuple[float, int]]:
    got = rounded_all(np.array(xs, dtype=np.float64), nd)
    want = [float(round(x, nd)) for x in xs]
    return [(x, nd) for x, g, w in zip(xs, got, want, strict=True)
            if not (math.isnan(w) and math.isnan(g)) and struct.pack("<d", g) != struct.pack("<d", w)]


def test_a_column_rounds_as_round_does() -> None:
    """``amount_rows.rounded_all`` (a column of hours or disk sizes) on the same kinds of figures."""
    rng = random.Random(20261206)
    misses = []
    for nd in (1, 2, 3, 4):
        xs = [rng.choice((1.0, -1.0)) * 10 ** rng.uniform(-9, 13) * rng.random() for _ in range(50_000)]
        for _ in range(5_000):
            half = (rng.randrange(0, 10 ** rng.randrange(1, 12)) + 0.5) / 10**nd
            xs += [half, math.nextafter(half, math.inf), math.nextafter(half, -math.inf), -half]
        xs += [0.0, -0.0, 5e-324, -0.0004, 0.0004, -0.00005, 2.675, 1.005, 1e16, -1e16, 1e308,
               math.inf, -math.inf, math.nan, 123456.789, -987.6545]
        misses += _same_all(xs, nd)
    assert misses == []
    assert math.copysign(1.0, rounded_all(np.array([-0.0004]), 3)[0]) == -1.0
