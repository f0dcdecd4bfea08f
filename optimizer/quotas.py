"""Quotas: whether the account may launch an option at all, as data passed in.

A quota is a limit per (provider, region, code): AWS Service Quotas codes count vCPUs of an
instance family (on demand and spot separately, per region); GCP metrics count GPUs of a model
per region (``NVIDIA_A100_GPUS``, ``PREEMPTIBLE_NVIDIA_A100_GPUS``) and all GPUs of the project
(``GPUS_ALL_REGIONS``, region ``global``). An option is

* ``short`` when a known limit is below what it needs (the code says what to request),
* ``ok`` when its provider's limit for it is known and covers it (and no known limit is short),
* ``unknown`` otherwise: no code for the instance, or no limit read for that code. Never ``ok``
  without data.

Pure: the limits come from ``pricing.quotas`` (a refresh, or the user's ``GPUCOST_QUOTAS`` file).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

from optimizer.estimator.memo import LruMemo

QuotaState = Literal["ok", "short", "unknown"]
GLOBAL = "global"

# Family codes from the bundled mapping (skypilot-catalog, 2023): G and VT, P.
AWS_G_ON_DEMAND, AWS_G_SPOT = "L-DB2E81BA", "L-3819A6DF"
AWS_P_ON_DEMAND, AWS_P_SPOT = "L-417A185B", "L-7212CCBC"
# "All P5 Spot Instance Requests": AWS's EC2 docs (Spot Instance quotas) list it beside the P4/P3/P2
# spot quota; the newer user guide shows one "All P Spot Instance Requests" - check with
# ``aws service-quotas list-service-quotas --service-code ec2``.
AWS_P5_SPOT = "L-C4BD4855"
# Instance types newer than the mapping, by the family rule the mapping follows (an inference,
# not a row of the source): g6/g6e/g6f/gr6 take the G codes, p5/p5e/p5en/p6 the P on-demand code.
_AWS_G = re.compile(r"^(g\d+[a-z]*|gr\d+)\.")
_AWS_P5 = re.compile(r"^p5[a-z]*\.")
_AWS_P = re.compile(r"^p\d+[a-z]*(-[a-z0-9]+)?\.")

# GCP regional GPU metrics per canonical GPU (Compute Engine quota metric names; GPUs counted).
GCP_GPU_METRIC: dict[str, str] = {
    "T4": "NVIDIA_T4_GPUS", "V100": "NVIDIA_V100_GPUS", "P100": "NVIDIA_P100_GPUS", "L4": "NVIDIA_L4_GPUS",
    "A100": "NVIDIA_A100_GPUS", "A100-80GB": "NVIDIA_A100_80GB_GPUS", "H100": "NVIDIA_H100_GPUS",
    "H200": "NVIDIA_H200_GPUS", "B200": "NVIDIA_B200_GPUS",
}
GCP_ALL_REGIONS = "GPUS_ALL_REGIONS"


@dataclass(frozen=True, slots=True)
class QuotaLimit:
    provider: str
    region: str  # "global" for project-wide metrics
    code: str
    limit: float
    source: str = ""
    name: str | None = None


class QuotaBook:
    """Limits by (provider, region, code); later entries (a user's file) override earlier ones."""

    def __init__(self, limits: Iterable[QuotaLimit] = ()) -> None:
        self._by: dict[tuple[str, str, str], QuotaLimit] = {}
        for q in limits:
            self._by[(q.provider.lower(), q.region, q.code)] = q

    def __len__(self) -> int:
        return len(self._by)

    def __bool__(self) -> bool:
        return bool(self._by)

    def get(self, provider: str, region: str, code: str) -> QuotaLimit | None:
        return self._by.get((provider.lower(), region, code))

    def limits(self) -> list[QuotaLimit]:
        return list(self._by.values())


@lru_cache(maxsize=1)
def _aws_codes() -> dict[str, tuple[str, str]]:
    text = resources.files("optimizer").joinpath("data/aws_quota_codes.csv").read_text(encoding="utf-8")
    rows = csv.DictReader(io.StringIO("".join(ln for ln in text.splitlines(True) if not ln.startswith("#"))))
    return {r["InstanceType"]: (r["OnDemandInstanceCode"], r["SpotInstanceCode"]) for r in rows}


def aws_quota_code(instance_type: str, spot: bool) -> str | None:
    """The Service Quotas code an AWS GPU instance counts against (vCPUs), or None if unknown."""
    known = _aws_codes().get(instance_type)
    if known is not None:
        return known[1] if spot else known[0]
    if _AWS_G.match(instance_type):
        return AWS_G_SPOT if spot else AWS_G_ON_DEMAND
    if _AWS_P5.match(instance_type):
        return AWS_P5_SPOT if spot else AWS_P_ON_DEMAND
    if _AWS_P.match(instance_type):
        return None if spot else AWS_P_ON_DEMAND  # p6 spot: no code found in a public source
    return None


def aws_codes() -> list[str]:
    """Every code ``aws_quota_code`` can name: what a refresh asks Service Quotas for."""
    codes = {c for pair in _aws_codes().values() for c in pair}
    return sorted(codes | {AWS_G_ON_DEMAND, AWS_G_SPOT, AWS_P_ON_DEMAND, AWS_P_SPOT, AWS_P5_SPOT})


def gcp_metric(gpu: str, spot: bool) -> str | None:
    base = GCP_GPU_METRIC.get(gpu)
    if base is None:
        return None
    return f"PREEMPTIBLE_{base}" if spot else base


@dataclass(frozen=True, slots=True)
class Need:
    code: str
    region: str
    amount: float
    unit: str


def needs(
    provider: str, region: str | None, instance_type: str, gpu: str, gpus_per_node: float, nodes: int,
    spot: bool, vcpus_per_node: float | None,
) -> list[Need] | None:
    """What one option draws on each quota it counts against; None when no code is known."""
    p = provider.lower()
    if p == "aws":
        code = aws_quota_code(instance_type, spot)
        if code is None or vcpus_per_node is None or region is None:
            return None
        return [Need(code, region, vcpus_per_node * nodes, "vCPUs")]
    if p == "gcp":
        metric = gcp_metric(gpu, spot)
        if metric is None or region is None:
            return None
        gpus = gpus_per_node * nodes
        return [Need(metric, region, gpus, "GPUs"), Need(GCP_ALL_REGIONS, GLOBAL, gpus, "GPUs")]
    return None


def quota_state(
    provider: str, region: str | None, instance_type: str, gpu: str, gpus_per_node: float, nodes: int,
    spot: bool, vcpus_per_node: float | None, book: QuotaBook,
) -> tuple[QuotaState, dict[str, Any]]:
    """``ok`` | ``short`` | ``unknown`` and the detail: code, need, limit, unit (the first short
    limit, or the option's own regional one)."""
    wanted = needs(provider, region, instance_type, gpu, gpus_per_node, nodes, spot, vcpus_per_node)
    if not wanted:
        return "unknown", {"code": None, "need": None, "limit": None, "reason": "no quota code known for this option"}
    primary = wanted[0]
    detail: dict[str, Any] = {"code": primary.code, "region": primary.region, "need": primary.amount,
                              "limit": None, "unit": primary.unit}
    state: QuotaState = "unknown"
    for i, n in enumerate(wanted):
        q = book.get(provider, n.region, n.code)
        if q is None:
            continue
        if q.limit < n.amount:
            return "short", {"code": n.code, "region": n.region, "need": n.amount, "limit": q.limit,
                             "unit": n.unit, "source": q.source}
        if i == 0:
            state = "ok"
            detail.update(limit=q.limit, source=q.source)
    if state == "unknown":
        detail["reason"] = "no limit read for this code (run `gpucost quotas refresh` or set GPUCOST_QUOTAS)"
    return state, detail


def short_reason(detail: Mapping[str, Any]) -> str:
    """The rejection reason of a ``short`` option: names the quota to request."""
    return f"quota short: {detail['code']} in {detail['region']} (raise it to at least {detail['need']:g} {detail['unit']})"


VcpusOf = Callable[[str, str | None, str], float | None]


# The table of one shared offer list, kept per list object (``offer_groups.kept_per_list``): a quote
# on a view asked for before builds none.
_VCPUS: LruMemo[int, tuple[list[Any], dict[tuple[str, str | None, str], float]]] = LruMemo(64)


def vcpus_lookup(offers: Iterable[Any]) -> VcpusOf:
    """(provider, region, instance type) -> vCPUs of the offers a decision saw."""
    from optimizer.candidates.offer_groups import kept_per_list

    def index() -> dict[tuple[str, str | None, str], float]:
        table: dict[tuple[str, str | None, str], float] = {}
        for o in offers:
            if o.vcpus is not None:
                table.setdefault((o.provider.lower(), o.region, o.instance_type), o.vcpus)
        return table

    table = kept_per_list(_VCPUS, offers, index)
    return lambda provider, region, itype: table.get((provider.lower(), region, itype))


def state_of(c: Any, book: QuotaBook, vcpus_of: VcpusOf) -> tuple[QuotaState, dict[str, Any]]:
    """The quota state of a cloud candidate or option (anything with the option's fields)."""
    return quota_state(
        c.provider, c.region, c.instance_type, c.gpu, float(c.gpus_per_node), int(c.nodes), c.pricing == "spot",
        vcpus_of(c.provider, c.region, c.instance_type), book,
    )


def annotate_options(options: Iterable[Any], book: QuotaBook, vcpus_of: VcpusOf) -> None:
    """Sets ``quota`` and ``quota_detail`` on each cloud option (local builds have none)."""
    for o in options:
        if o is None or o.kind != "cloud":
            continue
        o.quota, o.quota_detail = state_of(o, book, vcpus_of)


def drop_short(cs: Any, book: QuotaBook, vcpus_of: VcpusOf) -> None:
    """``constraints.respect_quotas``: takes ``short`` cloud candidates out of a ``CandidateSet``
    (in place) and counts each under a reason that names the quota code."""
    seen: set[str] = set()

    def keep(c: Any) -> bool:
        if c.kind != "cloud":
            return True
        state, detail = state_of(c, book, vcpus_of)
        if state != "short":
            return True
        if c.key not in seen:
            seen.add(c.key)
            cs.rejected.add(short_reason(detail), f"{c.provider}/{c.instance_type} x{c.nodes}")
        return False

    from optimizer.candidates import pareto

    cs.ranked = [c for c in cs.ranked if keep(c)]
    kept = [c for c in cs.pareto if keep(c)]
    # A short row may have hidden others (same hours, dearer) from the Pareto set: the per-offer
    # rows still ranked come back in, so the solver sees the best launchable option among them.
    cs.pareto = pareto([*kept, *cs.ranked]) if len(kept) < len(cs.pareto) else kept


def quota_key(provider: str, region: str, code: str) -> str:
    """One account quota as a plan's capacity key: ``aws/us-east-1/L-417A185B``."""
    return f"{provider.lower()}/{region}/{code}"


def draws(c: Any, vcpus_of: VcpusOf) -> tuple[tuple[str, float], ...]:
    """What a cloud candidate holds of each account quota while it runs (vCPUs or GPUs): a plan's
    runs in one month may together use at most limit x hours-in-the-month of each."""
    wanted = needs(c.provider, c.region, c.instance_type, c.gpu, float(c.gpus_per_node), int(c.nodes),
                   c.pricing == "spot", vcpus_of(c.provider, c.region, c.instance_type))
    return tuple((quota_key(c.provider, n.region, n.code), n.amount) for n in wanted or ())


def plan_caps(book: QuotaBook) -> dict[str, float]:
    """Each known limit by ``quota_key``: the units a plan's rentals may hold at once."""
    return {quota_key(q.provider, q.region, q.code): q.limit for q in book.limits()}
