"""Charts (matplotlib, no display): cumulative cost of renting vs buying, the cost/time frontier, and
a plan's monthly cost, bought against rented.

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
from optimizer.plan import PlanResult  # noqa: E402

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
    # The break-even basis: cash spent less what the machines would sell for that month (the curve
    # the optimizer's break-even and horizon answers use, so the lines cross at the break-even).
    ax.plot(months, [p.buy_net_of_resale_usd for p in r.cumulative],
            label=f"buy: {r.buy.machines} x {r.buy.build}, less resale at that month", color="tab:orange")
    ax.plot(months, [p.buy_usd for p in r.cumulative], label="buy, cash (no resale)", color="tab:orange",
            linestyle="--")
    if r.breakeven_months is not None and r.breakeven_months <= months[-1]:
        ax.axvline(r.breakeven_months, color="grey", linestyle=":", label=f"break-even {r.breakeven_months:.1f} months")
    ax.set_xlabel("months")
    ax.set_ylabel("cumulative cost, USD")
    ax.set_title(f"{r.runs_per_month:g} runs/month: renting vs buying")
    ax.grid(True, alpha=0.3)
    # Below the axes: inside, the legend sat on the rent line wherever it starts high (a dear rental).
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
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


def plan_chart(p: PlanResult, fmt: ImageFormat = "png") -> bytes:
    """Left: each month's cost, rented (cloud) against bought (machines and their energy), resale
    below zero. Right: the plan's cumulative cost against the all-cloud total over the horizon."""
    months = [m.month + 1 for m in p.monthly]
    fig = Figure(figsize=(10.0, 4.2))
    bars, cum = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    cloud = [m.cloud_usd for m in p.monthly]
    capex = [m.capex_usd for m in p.monthly]
    energy = [m.energy_usd for m in p.monthly]
    bars.bar(months, cloud, color="tab:blue", label="rented (cloud)")
    bars.bar(months, capex, bottom=cloud, color="tab:orange", label="bought (machines)")
    bars.bar(months, energy, bottom=[c + k for c, k in zip(cloud, capex, strict=True)], color="tab:red",
             label="energy of bought machines")
    resale = [-m.resale_usd for m in p.monthly]
    if any(resale):
        bars.bar(months, resale, color="tab:green", label="resale")
    if not months:
        bars.text(0.5, 0.5, "nothing placed", ha="center", va="center", transform=bars.transAxes)
    bars.axhline(0, color="black", linewidth=0.6)
    bars.set_xlabel("month")
    bars.set_ylabel("cost that month, USD")
    bars.set_title("Monthly cost: bought vs rented")
    bars.grid(True, axis="y", alpha=0.3)
    # Below the axes: inside, the legend would hide the months' bars.
    bars.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    total = 0.0
    running = []
    for m in p.monthly:
        total += m.total_usd
        running.append(total)
    cum.plot(months, running, color="tab:purple", marker="o", markersize=3, label="this plan")
    if p.all_cloud_cost_usd is not None:
        cum.axhline(p.all_cloud_cost_usd, color="tab:blue", linestyle="--",
                    label=f"all cloud, {p.horizon_months} months: ${p.all_cloud_cost_usd:,.0f}")
    cum.set_ylim(bottom=min(0.0, *running) if running else 0.0)  # from zero, so heights compare honestly
    cum.set_xlabel("month")
    cum.set_ylabel("cumulative cost, USD")
    cum.set_title("Cumulative cost")
    cum.grid(True, alpha=0.3)
    cum.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=1, frameon=False)
    fig.tight_layout()
    return _bytes(fig, fmt)
