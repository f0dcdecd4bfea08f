"""Quoted vs billed as a Markdown section (``gpucost reconcile --markdown``, ``POST /v1/reconcile``
with ``Accept: text/markdown``). Team names, run ids, services and resource ids are the caller's or
the bill's text: every one goes through ``service.render.markdown``'s escaping, never raw."""

from __future__ import annotations

from optimizer.runs import Reconciliation
from service.render.labels import escape_html
from service.render.markdown import table


def _usd(x: float) -> str:
    return f"{x:,.2f}"


def reconcile_markdown(r: Reconciliation) -> str:
    lines = [
        "## Quoted vs billed",
        "",
        escape_html(
            f"Bill ({r.format or 'auto'}): {r.lines} lines, billed ${r.billed_total_usd:,.2f}, effective "
            f"${r.effective_total_usd:,.2f}; unmatched ${r.unmatched_usd:,.2f} ({r.unmatched_lines} lines); "
            f"provisional ${r.provisional_usd:,.2f}."),
        "",
    ]
    rows = [(b.run_id, b.team or "-", _usd(b.quoted_usd), _usd(b.billed_usd), _usd(b.effective_usd),
             _usd(b.quoted_hours), _usd(b.billed_hours), b.cause + (" (provisional)" if b.provisional else ""))
            for b in r.runs]
    lines.append(table(["run", "team", "quoted $", "billed $", "effective $", "quoted h", "billed h", "cause"],
                       rows, right=(2, 3, 4, 5, 6)))
    if r.calibration:
        lines += ["", "Learnt corrections (applied to later quotes):", ""]
        lines.append(table(["provider", "GPU", "hours factor", "rate factor", "from runs"],
                           [(c.provider, c.gpu, f"x{c.hours_factor:g}", f"x{c.rate_factor:g}", ", ".join(c.runs))
                            for c in r.calibration], right=(2, 3)))
    if r.unmatched_top:
        lines += ["", "Largest unmatched charges:", ""]
        lines.append(table(["row", "billed $", "service", "resource"],
                           [(u.get("row", "-"), _usd(float(u.get("billed_usd") or 0.0)), u.get("service") or "-",
                             u.get("resource_id") or "-") for u in r.unmatched_top[:5]], right=(0, 1)))
    return "\n".join(lines) + "\n"
