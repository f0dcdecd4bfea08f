"""Charts (matplotlib, no display): cumulative cost of renting vs buying, and the cost/time frontier.

``matplotlib.figure.Figure`` is used directly rather than pyplot, so rendering keeps no global
state and is safe in the API's worker threads.
"""

from __future__ import annotations

import io
from typing import Literal

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402

from optimizer.breakeven import BreakevenResult  # noqa: E402
from optimizer.frontier import FrontierResult  # noqa: E402

ImageFormat = Literal["png", "svg"]
MEDIA_TYPES = {"png": "image/png", "svg": "image/svg+xml"}


def _bytes(fig: Figure, fmt: ImageFormat) -> bytes:
    buf = io.BytesIO()
    # A fixed hash salt and no date keep SVG output identical for identical input.
    meta = {"Date": None} if fmt == "svg" else {}
    with matplotlib.rc_context({"svg.hashsalt": "gpucost"}):
        fig.savefig(buf, format=fmt, dpi=120, bbox_inches="tight", metadata=meta)
    return buf.getvalue()


def breakeven_chart(r: BreakevenResult, fmt: ImageFormat = "png") -> bytes:
    months = [p.month for p in r.cumulative]
    fig = Figure(figsize=(7.5, 4.2))
    ax = fig.add_subplot()
    rent_label = f"rent: {r.rent.provider} {r.rent.instance_type} (${r.rent.cost_per_run_usd:,.2f}/run)"
    ax.plot(months, [p.rent_usd for p in r.cumulative], label=rent_label, color="tab:blue")
    # The break-even basis: price paid less the resale expected at the end of the machine's life.
    ax.plot(months, [p.buy_usd - r.buy.resale_usd for p in r.cumulative],
            label=f"buy: {r.buy.build}, less ${r.buy.resale_usd:,.0f} resale at end of life", color="tab:orange")
    ax.plot(months, [p.buy_usd for p in r.cumulative], label="buy, cash (no resale)", color="tab:orange",
            linestyle="--")
    if r.breakeven_months is not None and r.breakeven_months <= months[-1]:
        ax.axvline(r.breakeven_months, color="grey", linestyle=":", label=f"break-even {r.breakeven_months:.1f} months")
    ax.set_xlabel("months")
    ax.set_ylabel("cumulative cost, USD")
    ax.set_title(f"{r.runs_per_month:g} runs/month: renting vs buying")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return _bytes(fig, fmt)


def frontier_chart(f: FrontierResult, fmt: ImageFormat = "png") -> bytes:
    fig = Figure(figsize=(7.0, 4.2))
    ax = fig.add_subplot()
    xs = [p.hours for p in f.points]
    ys = [p.cost_usd for p in f.points]
    ax.step(xs, ys, where="post", color="tab:blue", alpha=0.5)
    ax.scatter(xs, ys, color="tab:blue", zorder=3)
    for p in f.points:
        ax.annotate(f"{p.option.provider} {p.option.instance_type}", (p.hours, p.cost_usd), fontsize=6,
                    xytext=(3, 3), textcoords="offset points")
    if xs and min(xs) > 0:
        ax.set_xscale("log")
    if not f.points:
        ax.text(0.5, 0.5, "no feasible option", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("hours per run")
    ax.set_ylabel(f"cost for {f.runs} run(s), USD")
    ax.set_title("Cost / time frontier")
    ax.grid(True, alpha=0.3)
    return _bytes(fig, fmt)
