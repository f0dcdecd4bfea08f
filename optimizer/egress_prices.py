"""Internet egress prices per provider (USD per GB), for the checkpoints, outputs and datasets a
request says leave the cloud (``constraints.egress_gb`` per run).

Each figure is the provider's published first-tier price to the internet from the regions the
catalog rows mostly come from, with its page and date; free monthly allowances are left out (a
team's other traffic usually uses them). ``None``: no public figure found; the answer says egress
was not priced there.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date


@dataclass(frozen=True, slots=True)
class EgressPrice:
    usd_per_gb: float
    source: str
    as_of: date


EGRESS: dict[str, EgressPrice | None] = {
    "aws": EgressPrice(0.09, "aws.amazon.com/ec2/pricing/on-demand: data transfer out to the internet, first 10 TB "
                       "a month $0.09/GB (US East)", date(2025, 11, 30)),
    "gcp": EgressPrice(0.12, "cloud.google.com/vpc/network-pricing: premium tier internet egress, 0-1 TiB a month "
                       "$0.12/GB (worldwide except China and Australia)", date(2025, 11, 30)),
    "azure": EgressPrice(0.087, "azure.microsoft.com/pricing/details/bandwidth: internet egress, first 10 TB a "
                         "month after 100 GB free $0.087/GB (North America, Europe)", date(2025, 6, 30)),
    "lambda": EgressPrice(0.0, "lambda.ai/pricing: no egress fees", date(2025, 11, 30)),
    "runpod": EgressPrice(0.0, "runpod.io/pricing: zero fees for ingress and egress", date(2025, 6, 30)),
    "colab": EgressPrice(0.0, "colab.research.google.com/signup: no traffic charges in the plan", date(2022, 9, 30)),
    # Vast.ai hosts set a bandwidth price per offer (docs.vast.ai/documentation/instances/pricing);
    # the catalog rows carry none: not priced here.
    "vast": None,
    "nebius": None,
    "paperspace": None,
    "alibaba": None,
    "autodl": None,
}


def egress_price(provider: str) -> EgressPrice | None:
    return EGRESS.get(provider.lower())


def egress_usd_per_gb(provider: str) -> float | None:
    p = egress_price(provider)
    return p.usd_per_gb if p is not None else None
