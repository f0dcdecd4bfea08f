"""How a value reads in a table, the same in the terminal, in Markdown and on the web page
(``service/web/static/app.js`` writes the same labels): a region without the empty parts of a
catalog's ``", CN, AS"``, ``on-demand`` rather than ``on_demand``, a price's date with its age, a
break-even the machine does not live to see said to be so, and no raw HTML from user text."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a quote's tables need no break-even module
    from optimizer.breakeven import BreakevenResult

# What a month is when an age is told in months (365.25 / 12 days).
DAYS_PER_MONTH = 30.44


def region_label(region: str | None) -> str:
    """``", CN, AS"`` -> ``"CN, AS"``: SkyPilot's Vast rows leave the city empty; ``-`` if nothing."""
    parts = [p.strip() for p in (region or "").split(",")]
    return ", ".join(p for p in parts if p) or "-"


def pricing_label(pricing: str | None) -> str:
    """``on_demand`` (the API's value) reads ``on-demand`` in every table."""
    return (pricing or "-").replace("_", "-")


def age_label(as_of: datetime | None, now: datetime | None = None) -> str:
    """``"2025-11-30, 12 months old"``: the date of a price and how old it is."""
    if as_of is None:
        return "-"
    when = as_of if as_of.tzinfo else as_of.replace(tzinfo=UTC)
    days = ((now or datetime.now(UTC)) - when).days
    day = when.date().isoformat()
    if days < 1:
        return f"{day}, today"
    if days < 60:
        return f"{day}, {days} day{'s' if days != 1 else ''} old"
    return f"{day}, {round(days / DAYS_PER_MONTH)} months old"


def age_short(as_of: datetime | None, now: datetime | None = None) -> str:
    """``"12 mo"``, ``"5 d"``, ``"today"``: a price's age where a terminal column has little room."""
    if as_of is None:
        return "-"
    when = as_of if as_of.tzinfo else as_of.replace(tzinfo=UTC)
    days = ((now or datetime.now(UTC)) - when).days
    if days < 1:
        return "today"
    return f"{days} d" if days < 60 else f"{round(days / DAYS_PER_MONTH)} mo"


def breakeven_phrase(r: BreakevenResult) -> str:
    """The break-even as the CLI, the Markdown and the page say it (after "break-even: "): one beyond
    the build's life is "past its N-month life", not thousands of runs nobody will reach."""
    if r.breakeven_runs is None:
        return "never (a rented run costs no more than the energy of an owned one)"
    if not r.within_lifetime:
        return f"past its {r.buy.lifetime_months}-month life"
    return f"after {r.breakeven_runs} runs = {r.breakeven_months:.1f} months at {r.runs_per_month:g} runs/month"


def escape_html(text: str) -> str:
    """User text (a job's name, a team, a model) in Markdown: ``<`` and ``>`` as entities, so a
    renderer shows ``<img src=x onerror=...>`` as text and never as a tag. Code spans are kept as
    they are: Markdown reads no HTML inside them, and a price source's ``PSU >= 1.3 x load`` must not
    read ``&gt;=`` there. ``&`` is kept too: on its own it starts no tag."""
    out: list[str] = []
    last = 0
    for span in _CODE_SPAN.finditer(text):
        out.append(_entities(text[last:span.start()]))
        out.append(span.group(0))
        last = span.end()
    out.append(_entities(text[last:]))
    return "".join(out)


# A Markdown code span: a run of backticks, then text, then the same run (CommonMark 6.1).
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)


def _entities(text: str) -> str:
    return text.replace("<", "&lt;").replace(">", "&gt;")
