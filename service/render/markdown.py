"""Markdown for quote, plan, break-even, frontier and recommendation: tables that paste cleanly
into a planning document, each with its price sources and dates."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from optimizer.breakeven import BreakevenResult
from optimizer.frontier import FrontierResult
from optimizer.plan import PlanResult
from optimizer.recommend import BuildRecommendation, RecommendResult
from optimizer.results import Estimate, Option, Quote, RejectedGroup, SolverInfo


def _cell(v: object) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def usd(x: float | None) -> str:
    if x is None:
        return "-"
    return f"${x:,.2f}" if abs(x) < 1e5 else f"${x:,.0f}"


def hours(x: float | None) -> str:
    return "-" if x is None else f"{x:,.2f} h"


def _date(d: datetime | None) -> str:
    return d.date().isoformat() if d else "-"


def _where(o: Option) -> str:
    if o.kind == "local":
        return f"local build `{o.instance_type}`"
    region = f"/{o.region}" if o.region else ""
    return f"{o.provider}{region} `{o.instance_type}`"


def _gpus(o: Option) -> str:
    n = f"{o.gpus_per_node:g}"
    return f"{o.nodes} x {n}x {o.gpu}" if o.nodes > 1 else f"{n}x {o.gpu}"


def solver_line(s: SolverInfo) -> str:
    # No solve time: the same request must give the same text, so a pasted quote diffs cleanly.
    gap = f", gap {s.gap:.2%}" if s.gap is not None else ""
    limit = f", limit {s.time_limit_s:g} s" if s.time_limit_s is not None else ""
    return f"Solver: {s.name}, status **{s.status}**{gap}{limit}."


def recipe_text(recipe: object, sharding: str | None = None) -> str:
    """``2 x 8 = 16, checkpointing, ddp``: micro-batch x accumulation (x GPUs) = global batch, as the
    CLI's table shows it (``Recipe.label``), then the sharding and any offload; ``-`` if none."""
    if recipe is None:
        return sharding or "-"
    label = getattr(recipe, "label", None)
    parts = [label()] if callable(label) else []
    get = recipe.get if isinstance(recipe, Mapping) else (lambda k, d=None: getattr(recipe, k, d))
    if not parts and get("micro_batch_size") is not None:
        parts.append(f"{get('micro_batch_size')} x {get('gradient_accumulation_steps') or 1}")
    scheme = get("sharding") or sharding
    if scheme:
        parts.append(str(scheme))
    offload = get("offload")
    if offload and offload != "none":
        parts.append(f"offload {offload}")
    return ", ".join(parts) or "-"


def rejected_table(groups: Sequence[RejectedGroup]) -> str:
    if not groups:
        return "_Nothing was rejected._"
    return table(["reason", "count", "examples"], [(g.reason, g.count, ", ".join(g.examples)) for g in groups])


def sources_table(options: Iterable[Option], prices_as_of: Mapping[str, datetime]) -> str:
    seen: dict[str, tuple[str, str]] = {}
    for o in options:
        if o.source and o.source not in seen:
            seen[o.source] = (o.provider, _date(o.as_of))
    rows = [(p, f"`{src}`", d) for src, (p, d) in seen.items()]
    rows += [(p, "snapshot", _date(d)) for p, d in sorted(prices_as_of.items()) if p not in {r[0] for r in rows}]
    return table(["provider", "source", "as of"], rows)


def quote_markdown(q: Quote, title: str = "GPU quote") -> str:
    out = [f"## {title}", ""]
    if q.best is None:
        out += ["**No feasible option.** Why each offer was rejected:", "", rejected_table(q.rejected), ""]
    else:
        b = q.best
        out += [
            f"**Cheapest:** {_where(b)}: {_gpus(b)}, {b.pricing.replace('_', '-')}, "
            f"{hours(b.hours)} per run, **{usd(b.cost_usd)}** for {q.runs} run(s).",
            "",
        ]
        if q.fastest is not None and q.fastest.hours < b.hours:
            f = q.fastest
            out += [f"**Fastest:** {_where(f)}: {_gpus(f)}, {hours(f.hours)} per run, {usd(f.cost_usd)}.", ""]
        rows = []
        for i, o in enumerate(q.options, 1):
            mark = " (chosen)" if i == 1 and q.best is not None else ""
            rows.append((
                f"{i}{mark}", _where(o), _gpus(o), o.pricing, usd(o.hourly_usd), hours(o.hours),
                f"{o.memory_need_gb_per_gpu:.1f} / {o.vram_gb_per_gpu:g}",
                recipe_text(getattr(o, "recipe", None), o.sharding), usd(o.cost_usd),
            ))
        out += [
            table(["#", "where", "GPUs", "pricing", "$/h", "hours/run", "GB need / VRAM", "recipe",
                   f"cost ({q.runs} runs)"], rows),
            "",
            "Local builds are costed as purchase price minus expected resale plus energy.",
            "",
        ]
        if q.rejected:
            out += ["Rejected:", "", rejected_table(q.rejected), ""]
    warnings = getattr(q, "warnings", None) or []
    if warnings:
        out += ["**Warnings:**", "", *(f"- {w}" for w in warnings), ""]
    out += [solver_line(q.solver), "", "Prices:", "", sources_table(q.options, q.prices_as_of), "",
            f"Snapshot `{q.snapshot_id}`."]
    return "\n".join(out) + "\n"


def breakeven_markdown(r: BreakevenResult, chart: str | None = None) -> str:
    be = (
        "never" if r.breakeven_runs is None
        else f"{r.breakeven_runs} runs = {r.breakeven_months:.1f} months at {r.runs_per_month:g} runs/month"
    )
    rent_where = f"{r.rent.provider}/{r.rent.region} `{r.rent.instance_type}`"
    out = [
        "## Rent or buy", "",
        table(
            ["", "option", "hours/run", "cost/run", "up front"],
            [
                ("rent", f"{rent_where} ({r.rent.gpu_count:g}x {r.rent.gpu}, {r.rent.pricing})",
                 hours(r.rent.hours_per_run), usd(r.rent.cost_per_run_usd), "-"),
                ("buy", f"`{r.buy.build}` ({r.buy.name})", hours(r.buy.hours_per_run),
                 f"{usd(r.buy.energy_per_run_usd)} energy", f"{usd(r.buy.capex_usd)} (resale {usd(r.buy.resale_usd)})"),
            ],
        ),
        "",
        f"**Break-even:** {be}"
        + ("" if r.within_lifetime or r.breakeven_runs is None else f" (after the build's {r.buy.lifetime_months}-month life)")
        + ".",
        f"Owning costs {usd(r.buy.cost_per_run_at_cadence_usd)} per run over its life at this cadence; "
        f"cheaper after {r.horizon_months} months: **{r.cheaper_at_horizon}**.",
        "",
    ]
    if chart:
        out += [f"![cumulative cost]({chart})", ""]
    out += ["Sensitivity:", "", table(
        ["parameter", "value", "break-even runs", "break-even months", "within life"],
        [(s.parameter, f"{s.value:g}", s.breakeven_runs if s.breakeven_runs is not None else "never",
          f"{s.breakeven_months:.1f}" if s.breakeven_months is not None else "-", "yes" if s.within_lifetime else "no")
         for s in r.sensitivity],
    ), ""]
    out += [f"- {n}" for n in r.notes] + [""]
    out += ["Prices:", "", table(["side", "source", "as of"], [
        ("rent", f"`{r.rent.source}`", _date(r.rent.as_of)),
        ("buy", f"`{r.buy.source}`", _date(r.buy.as_of)),
    ])]
    return "\n".join(out) + "\n"


def plan_markdown(p: PlanResult, chart: str | None = None) -> str:
    out = ["## Portfolio plan", "", solver_line(p.solver), ""]
    out += [table(["plan", "total over the horizon"], [
        ("chosen mix", usd(p.total_cost_usd)),
        ("all cloud", usd(p.all_cloud_cost_usd)),
        ("all local", usd(p.all_local_cost_usd)),
    ]), ""]
    if chart:
        out += [f"![monthly cost, bought vs rented]({chart})", ""]
    if p.buy:
        out += ["Buy:", "", table(["month", "build", "count", "price each"],
                                  [(b.month + 1, f"`{b.build}` {b.name}", b.count, usd(b.price_usd)) for b in p.buy]), ""]
    else:
        out += ["Buy nothing.", ""]
    if p.assignments:
        out += ["Where the runs go:", "", table(
            ["month", "job", "where", "GPU", "pricing", "runs", "hours/run", "cost"],
            [(a.month + 1, a.job, f"{a.provider}/{a.region or '-'} `{a.instance_type}`", a.gpu, a.pricing,
              a.runs, hours(a.hours_per_run), usd(a.cost_usd)) for a in p.assignments],
        ), ""]
    if p.monthly:
        out += ["Monthly cost:", "", table(
            ["month", "cloud", "energy", "capex", "resale", "total"],
            [(m.month + 1, usd(m.cloud_usd), usd(m.energy_usd), usd(m.capex_usd), usd(m.resale_usd), usd(m.total_usd))
             for m in p.monthly],
        ), ""]
    for u in p.unplaced:
        out += [f"Job **{u.job}** cannot run anywhere:", "", rejected_table(u.rejected), ""]
    out += [f"Prices as of: {', '.join(f'{k} {_date(v)}' for k, v in sorted(p.prices_as_of.items())) or '-'}; "
            f"snapshot `{p.snapshot_id}`."]
    return "\n".join(out) + "\n"


def frontier_markdown(f: FrontierResult) -> str:
    out = ["## Cost / time frontier", ""]
    if not f.points:
        out += ["**No feasible option.**", "", rejected_table(f.rejected)]
        return "\n".join(out) + "\n"
    out += [table(
        ["hours/run", f"cost ({f.runs} runs)", "$ per hour saved", "where", "GPUs", "pricing"],
        [(hours(p.hours), usd(p.cost_usd), usd(p.usd_per_hour_saved), _where(p.option), _gpus(p.option),
          p.option.pricing) for p in f.points],
    ), "", "Prices:", "", sources_table([p.option for p in f.points], f.prices_as_of)]
    return "\n".join(out) + "\n"


def _rec_rows(r: BuildRecommendation) -> list[tuple[object, ...]]:
    return [(c.category, c.name, usd(c.price_usd), c.need, c.why, "ok" if c.ok else "SHORT") for c in r.components]


def recommend_markdown(r: RecommendResult) -> str:
    out = ["## Build recommendation", ""]
    rec = r.recommendation
    if rec is None:
        out += ["**No balanced build meets the job.**", ""]
    else:
        be = "never" if rec.breakeven_runs is None else f"{rec.breakeven_runs} runs ({rec.breakeven_months:.1f} months)"
        out += [
            f"**{rec.name}** (`{rec.build_id}`, {rec.origin}): {usd(rec.price_usd)}, {hours(rec.hours_per_run)} per run, "
            f"{usd(rec.energy_per_run_usd)} energy per run; pays off against the best rental after {be}.",
            "",
            table(["part", "choice", "price", "needs", "why", "check"], _rec_rows(rec)),
            "",
        ]
    if r.best_rental is not None:
        o = r.best_rental
        out += [f"**Best rental:** {_where(o)}: {_gpus(o)}, {hours(o.hours)}, {usd(o.cost_usd)} per run.", ""]
    if r.alternatives:
        out += ["Alternatives:", "", table(
            ["build", "price", "hours/run", "balanced", "short of"],
            [(f"`{a.build_id}` {a.name}", usd(a.price_usd), hours(a.hours_per_run), "yes" if a.balanced else "no",
              "; ".join(a.warnings) or "-") for a in r.alternatives],
        ), ""]
    if r.rejected:
        out += ["Rejected:", "", rejected_table(r.rejected), ""]
    out += [f"- {n}" for n in r.notes]
    if rec is not None:
        srcs = [(c.category, c.part_id or "-", c.source or "-") for c in rec.components if c.source]
        if srcs:
            out += ["", "Part prices:", "", table(["part", "id", "source"], srcs)]
    return "\n".join(out) + "\n"


def estimate_markdown(e: Estimate) -> str:
    m = e.memory_gb
    verdict = "fits" if e.fits else "does not fit"
    out = [
        f"## Estimate on {e.gpu_count}x {e.gpu}", "",
        f"**{m.total_per_gpu:.1f} GB per GPU** of {e.gpu_vram_gb:g} GB: {verdict} ({e.sharding}). "
        f"{e.params / 1e9:.2f}B parameters, {e.trainable_params / 1e6:.1f}M trainable; "
        f"{e.tokens_per_second:,.0f} tokens/s, MFU {e.mfu:.0%}, {hours(e.hours)}.",
        "",
        table(["part", "GB per GPU"], [
            (part, f"{getattr(m, part):.2f}") for part in ("weights", "gradients", "optimizer", "activations", "overhead")
        ] + [("**total**", f"**{m.total_per_gpu:.2f}**")]),
        "",
        f"Recipe: {recipe_text(getattr(e, 'recipe', None), e.sharding)}. "
        f"Host: {e.host.ram_gb:.0f} GB RAM, {e.host.cpu_cores} CPU cores, {e.host.disk_gb:.0f} GB disk.",
    ]
    notes = list(e.notes) + [str(w) for w in getattr(e, "warnings", None) or ()]
    if notes:
        out += [""] + [f"- {n}" for n in notes]
    return "\n".join(out) + "\n"
