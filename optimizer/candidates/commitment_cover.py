"""What an offer's commitments add to offer dominance (``offer_groups``).

An offer that costs no more on demand (and spot) with at least the host of another is not enough
to set the other aside: a plan commits to the offer whose committed run is cheapest
(``plan_commitments.commitment_pools``) and a quote shows each option's commitments
(``commitments.commitment_options``), so a dearer offer with a cheaper reserved rate can be the
one the full catalog commits to. An offer is therefore only set aside by one that *covers* its
commitments:

* every commitment that can pay for it (a rate below its own on-demand price; all of them where it
  has none) is matched by one of the coverer of the same kind, class, term, payment and start date
  at a rate no higher, that also pays for the coverer (below the coverer's on-demand price);
* and the coverer's cheapest term is strictly cheaper, unless both hold the same terms at the same
  rates. A plan commits to the first of the offers whose cheapest term ties, and the terms of
  other lengths of the one it skips would then be lost; strictly cheaper, the covered offer is
  never the one chosen.

Both conditions chain (if B covers A and C covers B, C covers A), so a frontier built against
kept rows only stays exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from optimizer.offer import Offer

# (kind, offering class, term months, payment, first hour of a capacity block)
TermKey = tuple[str, str | None, float, str, datetime | None]


@dataclass(frozen=True, slots=True)
class Terms:
    """An offer's commitments that can pay for it: the lowest rate per term key."""

    rates: dict[TermKey, float]
    # The lowest rate of a term (not a dated capacity block); inf when it has none.
    cheapest_term: float


def terms_of(o: Offer) -> Terms | None:
    """The commitments of ``o`` that dominance must respect; None when there are none."""
    if not o.commitments:
        return None
    rates: dict[TermKey, float] = {}
    cheapest = math.inf
    for c in o.commitments:
        # A commitment at or above the on-demand price is never chosen (quotes and plans skip it).
        if o.price_hour is not None and c.effective_hourly_usd >= o.price_hour:
            continue
        key = (c.kind, c.offering_class, c.term_months, c.payment, c.starts_at)
        cur = rates.get(key)
        if cur is None or c.effective_hourly_usd < cur:
            rates[key] = c.effective_hourly_usd
        if c.kind != "capacity_block":
            cheapest = min(cheapest, c.effective_hourly_usd)
    return Terms(rates, cheapest) if rates else None


def covers(b: Terms | None, a: Terms | None) -> bool:
    """Whether an offer with commitments ``b`` may set aside one with ``a`` (see the module doc)."""
    if a is None:
        return True
    if b is None:
        return False
    for key, rate in a.rates.items():
        mine = b.rates.get(key)
        if mine is None or mine > rate:
            return False
    return b.rates == a.rates or a.cheapest_term == math.inf or b.cheapest_term < a.cheapest_term


def sort_rate(t: Terms | None) -> float:
    """Where an offer sorts among rows equal in price and host: the cheapest term first, so a
    coverer sorts before the rows it covers (of two with the same cheapest term, the first in
    catalog order is met first; the other is set aside if that one covers it, else kept)."""
    return math.inf if t is None else t.cheapest_term
