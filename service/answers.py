"""Each answer the service gives, computed in one place for both front ends.

A route and a CLI command differ only in how they read the request and show the result; what
they compute is ``<name>_answer(request, store)`` here, so the CLI's ``--json`` and the HTTP
response cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from optimizer.candidates import Estimator
from optimizer.candidates.offer_groups import OfferView, index_for, merge_rejected
from optimizer.errors import ProviderError
from optimizer.estimator.estimate import estimate
from optimizer.estimator.workload import Constraints
from optimizer.offer import LocalBuild, Offer, Part
from optimizer.price_warnings import DEFAULT_STALE_AFTER_DAYS
from optimizer.quotas import QuotaBook
from optimizer.quote import DEFAULT_TIME_LIMIT_S, quote
from pricing.electricity import resolve_usd_per_kwh
from service.api.limits import check_current, guarded_estimator, solve_budget_s
from service.bills import quote_calibration, save_quote_run
from service.schemas import (
    BreakevenRequest,
    Estimate,
    EstimateRequest,
    PlanRequest,
    Quote,
    QuoteRequest,
    RecommendRequest,
)
from service.settings import Settings

# plan() solves up to four times: the plan, the all-cloud, all-cloud-committed and all-local baselines.
PLAN_SOLVES = 4

if TYPE_CHECKING:
    from optimizer.breakeven import BreakevenResult
    from optimizer.frontier import FrontierResult
    from optimizer.measurement import Measurement
    from optimizer.plan import PlanResult
    from optimizer.recommend import RecommendResult
    from pricing.price_view import PriceView


class Current(Protocol):
    """What an answer reads of one set of current snapshots (``pricing.store.reads.CurrentPrices``,
    or the CLI's ``service.prepared.PreparedReader``)."""

    price_view: PriceView | None

    def snapshot_id(self) -> str: ...
    def prices_as_of(self) -> dict[str, datetime]: ...
    def local_builds(self) -> list[LocalBuild]: ...
    def local_build(self, build_id: str) -> LocalBuild: ...
    def all_offers(self) -> list[Offer]: ...


class Prices(Protocol):
    """Where an answer reads prices from: ``PriceStore`` or a ``PreparedReader``. Each answer
    reads which snapshots are current once (``current()``) and everything else from those."""

    def current(self) -> Current: ...


# The planner, break-even, frontier and recommender (and the worker pool the heavy ones may run
# in) are imported by the answers that use them, and measurements' models only where some are
# stored: a CLI quote starts without them.


def estimate_answer(req: EstimateRequest, measurements: Sequence[Measurement] = ()) -> Estimate:
    """The estimate, using ``measurements`` that match it (``optimizer.measured``); on ``cpu``
    only from a stored CPU measurement of the workload."""
    from optimizer.measured import cpu_estimate, measured_estimator
    from optimizer.measurement import CPU

    if req.gpu.strip().lower() == CPU:
        return cpu_estimate(req.workload, measurements, estimate)
    # A person asking about one GPU wants to hear what would make the job fit when it does not.
    # Guarded like every decision: a request already past its deadline is not computed.
    est = guarded_estimator(measured_estimator(estimate, measurements))
    return est(req.workload, req.gpu, req.gpu_count, suggest=True)


def _estimator(prices: object) -> Estimator:
    """The estimator a decision uses: the model's, with the measurements stored beside the
    prices (none: the model's own), checking the request's deadline on each call."""
    from pricing.store.measurement_peek import measurements_of

    measurements = measurements_of(prices)
    if not measurements:
        return guarded_estimator(estimate)  # what ``measured_estimator`` would hand back
    from optimizer.measured import measured_estimator

    return guarded_estimator(measured_estimator(estimate, measurements))


@dataclass(frozen=True)
class _Inputs:
    """What quote, frontier and plan start from: the constraints with their electricity price, one
    read of the current snapshots, its id, and the offers a decision under those constraints must
    look at (dominated ones set aside once per snapshot, ``optimizer.candidates.offer_groups``; the
    cheapest answer is the same as on all)."""

    constraints: Constraints
    store: Current
    snapshot_id: str
    view: OfferView


def _inputs(constraints: Constraints, prices: Prices) -> _Inputs:
    powered = _powered(constraints)
    store = prices.current()
    sid = store.snapshot_id()
    return _Inputs(powered, store, sid, index_for(sid, store.all_offers).view(powered))


def _stale_after_days(store: Current) -> float:
    view = getattr(store, "price_view", None)
    return view.stale_after_days if view is not None else DEFAULT_STALE_AFTER_DAYS


def _powered(constraints: Constraints) -> Constraints:
    """Constraints with ``electricity_region`` turned into its bundled price (an explicit
    ``electricity_usd_per_kwh`` wins), so every local cost uses it."""
    kwh = resolve_usd_per_kwh(constraints.electricity_usd_per_kwh, constraints.electricity_region,
                              "constraints.electricity_region")
    if kwh == constraints.electricity_usd_per_kwh:
        return constraints
    return constraints.model_copy(update={"electricity_usd_per_kwh": kwh})


def _quota_book(prices: Prices) -> QuotaBook:
    """Quotas as data for a decision: the stored ones with the GPUCOST_QUOTAS file over them."""
    from pricing.quotas import quota_book_for
    from service.settings import get_settings

    return quota_book_for(prices, get_settings().quotas)


def _reading(prices: object) -> AbstractContextManager[None]:
    """The answer's reads on one connection (``PriceStore.reading``) where the source has one."""
    reading = getattr(prices, "reading", None)
    return reading() if callable(reading) else nullcontext()


def quote_answer(req: QuoteRequest, prices: Prices) -> Quote:
    # Read everything first, on one connection, and compute once it is given back.
    with _reading(prices):
        got = _inputs(req.constraints, prices)
        store, view = got.store, got.view
        # Without local builds asked for, their store read is skipped (a query per request).
        builds = store.local_builds() if got.constraints.include_local else []
        estimator = _estimator(prices)
        calibration = quote_calibration(req, prices)
        book = _quota_book(prices)
    q = quote(
        req.workload, got.constraints, view.offers, builds,
        runs=req.runs, top=req.top, prices_as_of=store.prices_as_of(), snapshot_id=got.snapshot_id,
        price_reference=view.catalog, stale_after_days=_stale_after_days(store),
        estimator=estimator, time_limit_s=solve_budget_s(DEFAULT_TIME_LIMIT_S, 1),
        calibration=calibration, quota_book=book,
    )
    # Every offer stays accounted for: what the view set aside is listed with its reason.
    q.rejected = merge_rejected(q.rejected, view.left_out)
    if q.estimate is not None:
        q.estimate.update(offers_total=view.total, offers_considered=len(view.offers))
    return save_quote_run(req, q, prices)


def frontier_answer(req: QuoteRequest, prices: Prices) -> FrontierResult:
    from optimizer.frontier import frontier
    from service.api.workers import offloaded

    done, answer = offloaded("frontier", req)
    if done:
        return answer  # type: ignore[no-any-return]
    got = _inputs(req.constraints, prices)
    return frontier(
        req.workload, got.constraints, got.view.offers, got.store.local_builds(),
        runs=req.runs, prices_as_of=got.store.prices_as_of(), snapshot_id=got.snapshot_id,
        estimator=_estimator(prices),
    )


def breakeven_answer(req: BreakevenRequest, prices: Prices) -> BreakevenResult:
    from optimizer.breakeven import breakeven

    with _reading(prices):
        store = prices.current()
        builds = [store.local_build(req.buy.build)] if req.buy.build else store.local_builds()
        offers = store.all_offers()
        estimator = _estimator(prices)
    return breakeven(
        req.workload, req.rent, req.buy, offers, builds,
        runs_per_month=req.runs_per_month, horizon_months=req.horizon_months,
        electricity_usd_per_kwh=resolve_usd_per_kwh(req.electricity_usd_per_kwh, req.electricity_region),
        prices_as_of=store.prices_as_of(), snapshot_id=store.snapshot_id(),
        estimator=estimator,
    )


def plan_answer(req: PlanRequest, prices: Prices) -> PlanResult:
    from optimizer.plan import plan
    from service.api.workers import offloaded

    done, answer = offloaded("plan", req)
    if done:
        return answer  # type: ignore[no-any-return]
    got = _inputs(req.constraints, prices)
    return plan(
        req.jobs, req.horizon_months, got.constraints, got.view.offers,
        got.store.local_builds(), capex_budget_usd=req.capex_budget_usd, prices_as_of=got.store.prices_as_of(),
        snapshot_id=got.snapshot_id, estimator=_estimator(prices),
        # One limit for the whole request: the plan, all-cloud and all-local solves share it.
        time_limit_s=solve_budget_s(req.time_limit_s, PLAN_SOLVES),
        commitments=req.allow_commitments,
        commitment_value_after_horizon=req.commitment_value_after_horizon,
        quota_book=_quota_book(prices),
        checkpoint=check_current,
    )


def parts_catalog(settings: Settings) -> list[Part]:
    """The parts builds are composed from: the user's parts file if set, else the bundled one
    (the same choice the local-builds source makes)."""
    from pricing.adapters.local import bundled_parts, parts_from_csv

    if not settings.parts_file:
        return list(bundled_parts())
    try:
        text = Path(settings.parts_file).read_text(encoding="utf-8")
    except OSError as exc:
        raise ProviderError("local", f"cannot read parts file {settings.parts_file}: {exc.strerror or exc}") from None
    return list(parts_from_csv(text))


def recommend_answer(req: RecommendRequest, prices: Prices, settings: Settings) -> RecommendResult:
    from optimizer.recommend import recommend
    from service.api.workers import offloaded

    done, answer = offloaded("recommend", req)
    if done:
        return answer  # type: ignore[no-any-return]
    store = prices.current()
    return recommend(
        req.workload, store.local_builds(), store.all_offers(), parts=parts_catalog(settings),
        budget_usd=req.budget_usd, deadline_hours=req.deadline_hours, runs_per_month=req.runs_per_month,
        electricity_usd_per_kwh=resolve_usd_per_kwh(req.electricity_usd_per_kwh, req.electricity_region),
        prices_as_of=store.prices_as_of(), snapshot_id=store.snapshot_id(),
        estimator=_estimator(prices),
    )
