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
from service.render.labels import age_label, breakeven_phrase, escape_html, pricing_label, region_label
from service.render.commitments import (
    breakeven_commit_row,
    commitments_section,
    plan_commit_section,
    plan_committed_rows,
)
from service.render.risk import risk_section


def _cell(v: object) -> str:
    # No raw HTML from a job's or a team's name reaches a planning doc's renderer.
    return escape_html(str(v)).replace("|", "\\|").replace("\n", " ")


def _text(v: object) -> str:
    """User text outside a table (a job's name, a warning that quotes one): HTML escaped."""
    return escape_html(str(v))


def collapse_months(rows: Sequence[tuple[int, tuple[object, ...]]]) -> list[tuple[object, ...]]:
    """Consecutive months whose rows read the same become one row, ``"2-12"``: a year of identical
    months is one line, and a change (a purchase, a resale) still stands out. ``rows`` holds
    (month, the rest of the row as printed), months counted from 1, in order."""
    out: list[tuple[object, ...]] = []
    start = prev = 0
    cur: tuple[object, ...] | None = None
    for month, rest in rows:
        if cur is not None and rest == cur and month == prev + 1:
            prev = month
            continue
        if cur is not None:
            out.append((f"{start}" if start == prev else f"{start}-{prev}", *cur))
        start = prev = month
        cur = rest
    if cur is not None:
        out.append((f"{start}" if start == prev else f"{start}-{prev}", *cur))
    return out


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], right: Sequence[int] = ()) -> str:
    """A Markdown table with every cell escaped; columns whose index is in ``right`` align right."""
    rule = "|" + "|".join("---:" if i in right else "---" for i in range(len(headers))) + "|"
    lines = ["| " + " | ".join(headers) + " |", rule]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def usd(x: float | None) -> str:
    if x is None:
        return "-"
    text = f"{abs(x):,.2f}" if abs(x) < 1e5 else f"{abs(x):,.0f}"
    # "-$1.00", and never "$-0.00": a credit that rounds to nothing is nothing.
    return f"-${text}" if x < 0 and text.strip("0.,") else f"${text}"


def hours(x: float | None) -> str:
    return "-" if x is None else f"{x:,.2f} h"


def _date(d: datetime | None) -> str:
    return d.date().isoformat() if d else "-"


def _where(o: Option) -> str:
    if o.kind == "local":
        return f"local build `{o.instance_type}`"
    region = f"/{region_label(o.region)}" if o.region else ""
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


def calibration_section(q: Quote) -> list[str]:
    """Learnt corrections the quote applied, and the run it saved (issue 25)."""
    out: list[str] = []
    cal = q.best.calibration if q.best is not None else None
    if cal:
        out += [f"Corrected from reconciled bills: hours x{cal['hours_factor']:g}, rate x{cal['rate_factor']:g} "
                f"(runs {', '.join(cal['runs'])}).", ""]
    if q.saved_run:
        out += [f"**Saved as run `{q.saved_run['run_id']}`.** {_text(q.saved_run['note'])}", ""]
    return out


def quote_markdown(q: Quote, title: str = "GPU quote") -> str:
    out = [f"## {title}", ""]
    if q.best is None:
        out += ["**No feasible option.** Why each offer was rejected:", "", rejected_table(q.rejected), ""]
    else:
        b = q.best
        out += [
            f"**Cheapest:** {_where(b)}: {_gpus(b)}, {pricing_label(b.pricing)}, "
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
                f"{i}{mark}", _where(o), _gpus(o), pricing_label(o.pricing), usd(o.hourly_usd), hours(o.hours),
                f"{o.memory_need_gb_per_gpu:.1f} / {o.vram_gb_per_gpu:g}",
                recipe_text(getattr(o, "recipe", None), o.sharding), usd(o.cost_usd), age_label(o.as_of),
            ))
        out += [
            table(["#", "where", "GPUs", "pricing", "$/h", "hours/run", "GB need / VRAM", "recipe",
                   f"cost ({q.runs} runs)", "price as of"], rows),
            "",
            "Local builds are costed as purchase price minus expected resale plus energy.",
            "",
        ]
        # Each option's own risks (a tight fit, idle GPUs, a slow host): issue 19.
        notes = [f"- #{i} {_where(o)}: {_text(w)}" for i, o in enumerate(q.options, 1)
                 for w in getattr(o, "warnings", None) or ()]
        if notes:
            out += ["**Option warnings:**", "", *notes, ""]
        from service.render.basis import basis_section

        out += basis_section(q.options, _where)  # which hours were measured (issue 21)
        out += commitments_section([b, *q.options])
        out += risk_section([b, *q.options])
        out += calibration_section(q)
        if q.rejected:
            out += ["Rejected:", "", rejected_table(q.rejected), ""]
    saved = getattr(q, "saved_run", None)
    if saved:
        # The team and run id are the caller's text: shown in the doc, escaped, never as HTML.
        team = f" for team {_text(saved['team'])}" if saved.get("team") else ""
        out += [f"Saved as planned run {_text(saved['run_id'])}{team}. {_text(saved.get('note', ''))}".rstrip(), ""]
    warnings = getattr(q, "warnings", None) or []
    if warnings:
        out += ["**Warnings:**", "", *(f"- {_text(w)}" for w in warnings), ""]
    out += [solver_line(q.solver), "", "Prices:", "", sources_table(q.options, q.prices_as_of), "",
            f"Snapshot `{q.snapshot_id}`."]
    return "\n".join(out) + "\n"


def breakeven_markdown(r: BreakevenResult, chart: str | None = None) -> str:
    rent_where = f"{r.rent.provider}/{region_label(r.rent.region)} `{r.rent.instance_type}`"
    out = [
        "## Rent or buy", "",
        table(
            ["", "option", "hours/run", "cost/run", "up front"],
            [
                ("rent", f"{rent_where} ({r.rent.gpu_count:g}x {r.rent.gpu}, {pricing_label(r.rent.pricing)})",
                 hours(r.rent.hours_per_run), usd(r.rent.cost_per_run_usd), "-"),
                ("buy", f"`{r.buy.build}` ({r.buy.name})", hours(r.buy.hours_per_run),
                 f"{usd(r.buy.energy_per_run_usd)} energy", f"{usd(r.buy.capex_usd)} (resale {usd(r.buy.resale_usd)})"),
                *breakeven_commit_row(getattr(r, "commitment", None)),
            ],
        ),
        "",
        f"**Break-even:** {breakeven_phrase(r)}.",
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
    out += [f"- {_text(n)}" for n in r.notes] + [""]
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
        *plan_committed_rows(p, usd),
        ("all local", usd(p.all_local_cost_usd)),
    ]), ""]
    if chart:
        out += [f"![monthly cost, bought vs rented]({chart})", ""]
    if p.buy:
        out += ["Buy:", "", table(["month", "build", "count", "price each"],
                                  [(b.month + 1, f"`{b.build}` {b.name}", b.count, usd(b.price_usd)) for b in p.buy]), ""]
    else:
        out += ["Buy nothing.", ""]
    out += plan_commit_section(p, usd)
    if p.assignments:
        # One row per job and stretch of months that run the same way (months are 1-based).
        by_job: dict[str, list[tuple[int, tuple[object, ...]]]] = {}
        for a in sorted(p.assignments, key=lambda a: (a.job, a.month)):
            by_job.setdefault(a.job, []).append((a.month + 1, (
                f"local build `{a.instance_type}`" if a.kind == "local"
                else f"{a.provider}/{region_label(a.region)} `{a.instance_type}`", a.gpu, pricing_label(a.pricing),
                a.runs, hours(a.hours_per_run), usd(a.cost_usd))))
        rows = [(months, job, *rest) for job, runs in by_job.items() for months, *rest in collapse_months(runs)]
        out += ["Where the runs go (cost per month):", "", table(
            ["months", "job", "where", "GPU", "pricing", "runs", "hours/run", "cost"], rows), ""]
    if p.monthly:
        out += ["Monthly cost:", "", table(
            ["months", "cloud", "energy", "capex", "resale", "total each month"],
            collapse_months([(m.month + 1, (usd(m.cloud_usd), usd(m.energy_usd), usd(m.capex_usd), usd(m.resale_usd),
                                            usd(m.total_usd))) for m in p.monthly]),
        ), ""]
    for u in p.unplaced:
        out += [f"Job **{_text(u.job)}** cannot run anywhere:", "", rejected_table(u.rejected), ""]
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
          pricing_label(p.option.pricing)) for p in f.points],
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
    out += [f"- {_text(n)}" for n in r.notes]
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
    if getattr(e, "basis", "model") != "model":
        from service.render.basis import basis_line

        out += ["", f"**Basis:** {basis_line(e.basis, e.measurement_id)}."]
    notes = list(e.notes) + [str(w) for w in getattr(e, "warnings", None) or ()]
    if notes:
        out += [""] + [f"- {_text(n)}" for n in notes]
    return "\n".join(out) + "\n"
