"""Match bill lines to planned runs and say, per run, where quoted and billed part.

Matching, first rule that applies:

1. the line's ``gpucost-run-id`` tag names a known run;
2. else the line's resource id is one of a run's ``resource_ids`` and the charge period lies in the
   run's window (``window_start`` or ``created_at`` .. ``window_end`` or open).

Lines that match nothing are *unmatched*: their spend is reported, never dropped, so
``sum(run billed) + unmatched = billed total`` exactly (``Decimal`` arithmetic, rounded once to the
cent at the end).

Per run, with q = quoted, b = billed, r = the quote's hourly rate (all nodes) and C the compute
dollars paid (``EffectiveCost``: commitment-covered usage at its amortised cost)::

    hours_usd   = (b_hours - q_hours) * r
    rate_usd    = C - b_hours * r
    storage_usd = storage paid - storage quoted
    egress_usd  = egress paid - egress quoted
    other_usd   = effective - quoted - (the four above)

so the five add up to ``effective_usd - quoted_usd``. Billed hours are instance-hours divided by
the option's nodes (wall hours of the run). The largest part by size names the cause.

A line whose charge period ends within the provider's billing lag of ``now`` is *provisional*: the
provider may still add to it. Pure: no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal

from optimizer.runs import BillLine, PlannedRun, Reconciliation, RunBill, RunDifference

CENT = Decimal("0.01")

# How long after the usage a provider's bill may still change. AWS: "AWS updates the cost and
# usage data at least once a day" and estimated charges settle after the month closes (AWS Data
# Exports user guide, "Data Exports delivery", read 2026-12); GCP: "some usage may take longer
# than 24 hours to appear" (Cloud Billing "Understand Cloud Billing data export to BigQuery",
# read 2026-12). One day is what both name; it is an assumption of the reconciliation, shown in docs.
BILLING_LAG_HOURS: Mapping[str, float] = {"aws": 24.0, "gcp": 24.0, "azure": 24.0}
DEFAULT_LAG_HOURS = 24.0

# Differences smaller than this share of the quote (or a cent) are "as quoted".
AS_QUOTED_REL = 0.005


def cents(value: Decimal) -> float:
    return float(value.quantize(CENT, rounding=ROUND_HALF_EVEN))


def provisional(line: BillLine, now: datetime) -> bool:
    lag = BILLING_LAG_HOURS.get(line.provider, DEFAULT_LAG_HOURS)
    return line.end > now - timedelta(hours=lag)


def _in_window(line: BillLine, run: PlannedRun) -> bool:
    start = run.window_start or run.created_at
    if line.end <= start:
        return False
    return run.window_end is None or line.start < run.window_end


def match_lines(lines: Iterable[BillLine], runs: Sequence[PlannedRun]) -> tuple[dict[str, list[tuple[BillLine, str]]], list[BillLine]]:
    """Lines per run id (with how each matched) and the lines no run claims."""
    by_id = {r.run_id: r for r in runs}
    by_resource: dict[str, list[PlannedRun]] = defaultdict(list)
    for r in runs:
        for rid in r.resource_ids:
            by_resource[rid].append(r)
    matched: dict[str, list[tuple[BillLine, str]]] = defaultdict(list)
    unmatched: list[BillLine] = []
    for line in lines:
        tagged = line.run_id
        if tagged is not None and tagged in by_id:
            matched[tagged].append((line, "tag"))
            continue
        owners = [r for r in by_resource.get(line.resource_id or "", []) if _in_window(line, r)]
        if owners:
            # Two runs claiming one resource at once: the latest planned one ran there.
            owner = max(owners, key=lambda r: r.window_start or r.created_at)
            matched[owner.run_id].append((line, "resource"))
        else:
            unmatched.append(line)
    return matched, unmatched


def cause_of(diff: RunDifference, quoted_usd: float, total_usd: float) -> str:
    """The largest part of the difference, named as a person would say it."""
    if abs(total_usd) <= max(0.01, AS_QUOTED_REL * quoted_usd):
        return "as quoted"
    parts = {
        "hours": diff.hours_usd, "rate": diff.rate_usd, "storage": diff.storage_usd,
        "egress": diff.egress_usd, "other": diff.other_usd,
    }
    name, value = max(parts.items(), key=lambda kv: abs(kv[1]))
    names = {
        "hours": ("ran longer", "ran shorter"), "rate": ("dearer rate", "cheaper rate"),
        "storage": ("storage left running", "less storage"), "egress": ("egress", "less egress"),
        "other": ("other charges", "fewer other charges"),
    }
    return names[name][0 if value > 0 else 1]


def run_bill(run: PlannedRun, lines: Sequence[tuple[BillLine, str]], now: datetime) -> RunBill:
    billed = sum((ln.billed_usd for ln, _ in lines), Decimal(0))
    effective = sum((ln.effective_usd for ln, _ in lines), Decimal(0))
    by_cat: dict[str, Decimal] = defaultdict(Decimal)
    instance_hours = 0.0
    for ln, _ in lines:
        by_cat[ln.category] += ln.effective_usd
        if ln.category == "compute":
            per = run.option.gpus_per_node if ln.hours_per == "gpu" and run.option.gpus_per_node > 0 else 1.0
            instance_hours += ln.hours / per
    opt = run.option
    nodes = max(1, opt.nodes)
    billed_hours = instance_hours / nodes
    rate = opt.hourly_usd
    compute = float(by_cat["compute"])
    q_storage = run.quoted_part_usd("storage_usd")
    q_egress = run.quoted_part_usd("egress_usd")
    hours_usd = (billed_hours - run.quoted_hours) * rate
    rate_usd = compute - billed_hours * rate
    storage_usd = float(by_cat["storage"]) - q_storage
    egress_usd = float(by_cat["egress"]) - q_egress
    total = float(effective) - run.quoted_usd
    diff = RunDifference(
        hours_usd=round(hours_usd, 4), rate_usd=round(rate_usd, 4), storage_usd=round(storage_usd, 4),
        egress_usd=round(egress_usd, 4),
        other_usd=round(total - hours_usd - rate_usd - storage_usd - egress_usd, 4),
    )
    return RunBill(
        run_id=run.run_id, team=run.team, job=run.job, provider=opt.provider, gpu=opt.gpu,
        quoted_usd=round(run.quoted_usd, 4), billed_usd=cents(billed), effective_usd=cents(effective),
        quoted_hours=round(run.quoted_hours, 4), billed_hours=round(billed_hours, 4),
        quoted_rate_usd=round(rate, 6),
        billed_rate_usd=round(compute / billed_hours, 6) if billed_hours > 0 else None,
        differences=diff, cause=cause_of(diff, run.quoted_usd, total),
        provisional=any(provisional(ln, now) for ln, _ in lines), lines=len(lines),
        matched_by=sorted({how for _, how in lines}),
    )


def reconcile(lines: Sequence[BillLine], runs: Sequence[PlannedRun], *, now: datetime, top_unmatched: int = 10) -> Reconciliation:
    """Per-run bills, unmatched spend and the file's totals (calibration is added by the caller)."""
    matched, unmatched = match_lines(lines, runs)
    by_id = {r.run_id: r for r in runs}
    bills = [run_bill(by_id[rid], ls, now) for rid, ls in sorted(matched.items())]
    billed_total = sum((ln.billed_usd for ln in lines), Decimal(0))
    effective_total = sum((ln.effective_usd for ln in lines), Decimal(0))
    unmatched_billed = sum((ln.billed_usd for ln in unmatched), Decimal(0))
    unmatched_effective = sum((ln.effective_usd for ln in unmatched), Decimal(0))
    late = sum((ln.billed_usd for ln in lines if provisional(ln, now)), Decimal(0))
    top = sorted(unmatched, key=lambda ln: abs(ln.billed_usd), reverse=True)[:top_unmatched]
    return Reconciliation(
        runs=bills,
        unmatched_usd=cents(unmatched_billed),
        billed_total_usd=cents(billed_total),
        effective_total_usd=cents(effective_total),
        provisional_usd=cents(late),
        unmatched_effective_usd=cents(unmatched_effective),
        lines=len(lines),
        unmatched_lines=len(unmatched),
        unmatched_top=[
            {"row": ln.row, "billed_usd": cents(ln.billed_usd), "effective_usd": cents(ln.effective_usd),
             "provider": ln.provider, "service": ln.service, "resource_id": ln.resource_id,
             "description": ln.description, "charge_period_start": ln.start.isoformat()}
            for ln in top
        ],
    )
