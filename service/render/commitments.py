"""Commitment prices in Markdown: per cloud option its terms, and the committed side of a break-even."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from optimizer.commitments import CommitmentBreakeven, CommitmentOption
from optimizer.results import Option
from service.render.labels import region_label

# Shown per option: a quote answer lists every term in JSON; the page keeps to the cheapest few.
SHOWN_PER_OPTION = 4


def term_label(kind: str, term_months: float, payment: str, offering_class: str | None = None) -> str:
    term = f"{term_months:g} mo" if term_months >= 1 else f"{term_months * 730:.0f} h block"
    klass = f" {offering_class}" if offering_class else ""
    return f"{kind}{klass}, {term}, {payment.replace('_', ' ')}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def commitment_rows(options: Iterable[Option]) -> list[tuple[str, ...]]:
    rows = []
    seen: set[tuple[str, str | None, str]] = set()
    for o in options:
        terms: Sequence[CommitmentOption] = getattr(o, "commitments", None) or []
        key = (o.provider, o.region, o.instance_type)
        if not terms or key in seen:
            continue
        seen.add(key)
        for c in terms[:SHOWN_PER_OPTION]:
            rows.append((
                f"{o.provider}/{region_label(o.region)} `{o.instance_type}`",
                term_label(c.kind, c.term_months, c.payment, c.offering_class),
                f"${c.effective_hourly_usd:,.4f}", f"{c.saving_vs_on_demand:.0%}",
                _pct(c.breakeven_utilization) if c.kind != "capacity_block" else "per hour used",
                c.as_of.date().isoformat(),
            ))
    return rows


def commitments_section(options: Iterable[Option]) -> list[str]:
    """Markdown lines (empty when no option has a commitment)."""
    rows = commitment_rows(options)
    if not rows:
        return []
    from service.render.markdown import table

    return [
        "Commitments (paid for every hour of the term; each beats on demand above its break-even utilisation):",
        "",
        table(["option", "commitment", "effective $/h", "saving", "break-even use", "as of"], rows),
        "",
    ]


def breakeven_commit_row(c: CommitmentBreakeven | None) -> list[tuple[str, str, str, str, str]]:
    """The break-even table's row for renting under the cheapest commitment."""
    if c is None:
        return []
    return [(
        "commit",
        f"{c.instances} x {term_label(c.kind, c.term_months, c.payment, c.offering_class)} at "
        f"${c.effective_hourly_usd:,.4f}/h (pays above {_pct(c.breakeven_utilization)} use; "
        f"this cadence {c.utilization:.0%})",
        "-", f"${c.cost_per_run_usd:,.2f}", f"${c.cost_per_month_usd:,.0f} a month, used or not",
    )]


def plan_committed_rows(p: object, usd: Callable[[float | None], str]) -> list[tuple[str, str]]:
    """The plan comparison's row for 'all cloud, with commitments' (absent when none were offered)."""
    value = getattr(p, "all_cloud_committed_cost_usd", None)
    return [] if value is None else [("all cloud, committing where it pays", usd(value))]


def plan_commit_section(p: object, usd: Callable[[float | None], str]) -> list[str]:
    """The plan's ``commit`` lines as a table, next to what it buys."""
    items = getattr(p, "commit", None) or []
    if not items:
        return []
    from service.render.markdown import table

    horizon = "the horizon's months only" if getattr(p, "commitment_value_after_horizon", False) else "the whole term"
    rows = [(it.start_month + 1, f"{it.provider}/{region_label(it.region)} `{it.instance_type}`",
             term_label(it.kind, it.term_months, it.payment, it.offering_class), it.count,
             f"${it.effective_hourly_usd:,.4f}", f"{it.charged_months:g}", usd(it.cost_usd)) for it in items]
    return [f"Commit (paid whether used or not; charged for {horizon}):", "",
            table(["start month", "where", "term", "count", "effective $/h", "months charged", "cost"], rows), ""]


def commitment_lines(option: Option, shown: int = 3) -> list[str]:
    """Plain lines for the terminal: the cheapest commitments of one option."""
    terms = getattr(option, "commitments", None) or []
    out = []
    for c in terms[:shown]:
        use = "per hour used" if c.breakeven_utilization is None else f"pays above {c.breakeven_utilization:.0%} use"
        out.append(f"  commit: {term_label(c.kind, c.term_months, c.payment, c.offering_class)} "
                   f"${c.effective_hourly_usd:,.4f}/h ({c.saving_vs_on_demand:.0%} off, {use}; as of {c.as_of.date()})")
    if len(terms) > shown:
        out.append(f"  ... {len(terms) - shown} more commitment terms in --json / --markdown")
    return out
