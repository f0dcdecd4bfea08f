"""The user's own price book: discounts, negotiated prices and on-prem GPU rates.

A price book is a YAML or CSV file (``GPUCOST_PRICE_BOOK``) applied wherever offers are read
(``pricing.price_view``: offers, quotes, break-even, plans, recommendations), read once at start so a
missing or invalid book stops the command or the server, naming the file:

- ``discounts``: a factor per provider on list prices (``aws: 0.85``), or separate factors for
  on-demand and spot (``gcp: {on_demand: 0.8, spot: 1.0}``);
- ``negotiated``: a fixed hourly price per (provider, instance type[, region]); a regional entry
  wins over a provider-wide one, and a negotiated price replaces any discount;
- ``onprem``: the user's own GPU nodes (a lab box, a Kubernetes pool) at an hourly rate per GPU,
  added as offers of provider ``onprem``.

YAML::

    name: acme-2026
    as_of: 2026-11-01
    discounts: {aws: 0.85, gcp: {on_demand: 0.8, spot: 1.0}}
    negotiated:
      - {provider: aws, instance_type: p4d.24xlarge, region: us-east-1, price_hour: 18.0}
    onprem:
      - {name: lab-4x4090, gpu: RTX4090, gpus_per_node: 4, gpu_hour_usd: 0.35}

CSV: one row per entry, columns ``kind`` (discount | negotiated | onprem), ``provider``,
``instance_type``, ``region``, ``factor``, ``spot_factor``, ``price_hour``, ``spot_price_hour``,
``name``, ``gpu``, ``gpus_per_node``, ``gpu_hour_usd``, ``vcpus``, ``ram_gb`` (unused cells empty).
Offers a book changes carry ``+pricebook:<name>`` in their ``source``, so quotes name it.
A book without ``as_of`` is dated by its file's last change: the same file gives the same prices,
dates and snapshot id in every process.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from optimizer.errors import InvalidInput
from optimizer.estimator.gpus import canonical_gpu, gpu_spec
from optimizer.offer import Offer

ONPREM_PROVIDER = "onprem"

Factor = Annotated[float, Field(gt=0, le=10)]


class Discount(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    on_demand: Factor = 1.0
    spot: Factor = 1.0


class NegotiatedPrice(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    provider: str
    instance_type: str
    region: str | None = None
    price_hour: Annotated[float, Field(gt=0)]
    spot_price_hour: Annotated[float, Field(gt=0)] | None = None
    note: str = ""


class OnPremNode(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str
    gpu: str
    gpus_per_node: Annotated[int, Field(ge=1)] = 1
    gpu_hour_usd: Annotated[float, Field(gt=0, description="what one GPU-hour costs the owner")]
    region: str = ONPREM_PROVIDER
    vcpus: float | None = None
    ram_gb: float | None = None

    @field_validator("gpu")
    @classmethod
    def _canonical(cls, value: str) -> str:
        return canonical_gpu(value, field="price_book.onprem.gpu")


class PriceBook(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str = "price-book"
    as_of: datetime = Field(default_factory=lambda: datetime.now(UTC))
    discounts: dict[str, Discount] = Field(default_factory=dict)
    negotiated: list[NegotiatedPrice] = Field(default_factory=list)
    onprem: list[OnPremNode] = Field(default_factory=list)

    @field_validator("discounts", mode="before")
    @classmethod
    def _plain_factor(cls, value: Any) -> Any:
        # "aws: 0.85" is shorthand for the same factor on on-demand and spot.
        if isinstance(value, dict):
            return {
                k.lower(): ({"on_demand": v, "spot": v} if isinstance(v, int | float) else v)
                for k, v in value.items()
            }
        return value

    @field_validator("as_of", mode="before")
    @classmethod
    def _date_is_midnight_utc(cls, value: Any) -> Any:
        if isinstance(value, date) and not isinstance(value, datetime):
            return datetime(value.year, value.month, value.day, tzinfo=UTC)
        return value

    @model_validator(mode="after")
    def _unique(self) -> PriceBook:
        keys = [(n.provider, n.instance_type, n.region) for n in self.negotiated]
        if len(keys) != len(set(keys)):
            raise ValueError("negotiated prices repeat a (provider, instance_type, region)")
        names = [n.name for n in self.onprem]
        if len(names) != len(set(names)):
            raise ValueError("on-prem node names repeat")
        return self


def _negotiated_for(book: PriceBook) -> dict[tuple[str, str, str | None], NegotiatedPrice]:
    return {(n.provider.lower(), n.instance_type, n.region): n for n in book.negotiated}


def _scaled(value: float | None, factor: float) -> float | None:
    return round(value * factor, 6) if value is not None else None


def _apply_one(
    offer: Offer, book: PriceBook, negotiated: dict[tuple[str, str, str | None], NegotiatedPrice]
) -> Offer:
    provider = offer.provider.lower()
    deal = negotiated.get((provider, offer.instance_type, offer.region)) or negotiated.get(
        (provider, offer.instance_type, None)
    )
    tag = f"{offer.source}+pricebook:{book.name}"
    if deal is not None:
        spot = deal.spot_price_hour if deal.spot_price_hour is not None else offer.spot_price_hour
        return offer.model_copy(
            update={
                "price_hour": deal.price_hour,
                "spot_price_hour": spot,
                # A negotiated price is agreed in USD; the list price's currency no longer applies.
                "currency": "USD",
                "price_hour_native": deal.price_hour,
                "spot_price_hour_native": spot,
                "source": tag,
            }
        )
    discount = book.discounts.get(provider)
    if discount is None or (discount.on_demand == 1.0 and discount.spot == 1.0):
        return offer
    return offer.model_copy(
        update={
            "price_hour": _scaled(offer.price_hour, discount.on_demand),
            "spot_price_hour": _scaled(offer.spot_price_hour, discount.spot),
            "price_hour_native": _scaled(offer.price_hour_native, discount.on_demand),
            "spot_price_hour_native": _scaled(offer.spot_price_hour_native, discount.spot),
            "source": tag,
        }
    )


def onprem_offers(book: PriceBook) -> list[Offer]:
    """The book's own GPU nodes as offers (provider ``onprem``)."""
    return [
        Offer(
            provider=ONPREM_PROVIDER,
            region=node.region,
            instance_type=node.name,
            gpu=node.gpu,
            gpu_count=node.gpus_per_node,
            gpu_vram_gb=gpu_spec(node.gpu).vram_gb,
            vcpus=node.vcpus,
            ram_gb=node.ram_gb,
            price_hour=round(node.gpu_hour_usd * node.gpus_per_node, 6),
            currency="USD",
            price_hour_native=round(node.gpu_hour_usd * node.gpus_per_node, 6),
            billing_increment_s=1,
            min_billing_s=0,
            source=f"pricebook:{book.name}",
            as_of=book.as_of,
        )
        for node in book.onprem
    ]


def apply_price_book(offers: Iterable[Offer], book: PriceBook | None) -> list[Offer]:
    """Offers with the book's negotiated prices and discounts applied, plus its on-prem nodes.

    Pure: the input offers are not changed. Offers the book changes name it in ``source``.
    """
    offers = list(offers)
    if book is None:
        return offers
    negotiated = _negotiated_for(book)
    changed = [_apply_one(o, book, negotiated) for o in offers]
    return changed + onprem_offers(book)


def _csv_book(text: str, name: str) -> dict[str, Any]:
    data: dict[str, Any] = {"name": name, "discounts": {}, "negotiated": [], "onprem": []}
    for line, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        cells = {k.strip(): (v or "").strip() for k, v in row.items() if k}
        kind = cells.get("kind", "").lower()
        filled = {k: v for k, v in cells.items() if v and k != "kind"}
        if kind == "discount":
            factor = filled.get("factor")
            if not factor or "provider" not in filled:
                reason = f"line {line}: a discount needs provider and factor"
                raise InvalidInput("price_book", reason)
            data["discounts"][filled["provider"]] = {
                "on_demand": factor,
                "spot": filled.get("spot_factor", factor),
            }
        elif kind == "negotiated":
            keep = ("provider", "instance_type", "region", "price_hour", "spot_price_hour", "note")
            data["negotiated"].append({k: v for k, v in filled.items() if k in keep})
        elif kind == "onprem":
            keep = ("name", "gpu", "gpus_per_node", "gpu_hour_usd", "region", "vcpus", "ram_gb")
            data["onprem"].append({k: v for k, v in filled.items() if k in keep})
        elif kind == "meta":
            data.update({k: v for k, v in filled.items() if k in ("name", "as_of")})
        else:
            raise InvalidInput("price_book", f"line {line}: unknown kind {cells.get('kind')!r}")
    return data


def load_price_book(path: Path | str) -> PriceBook:
    """Read a YAML (``.yaml``/``.yml``) or CSV price book; bad files raise ``InvalidInput``."""
    import yaml  # only price books in YAML need it

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInput("price_book", f"cannot read {path}: {exc}") from exc
    try:
        if path.suffix.lower() == ".csv":
            data = _csv_book(text, path.stem)
        else:
            data = yaml.safe_load(text) or {}
            if not isinstance(data, dict):
                raise InvalidInput("price_book", f"{path} does not hold a mapping")
            data.setdefault("name", path.stem)
        data.setdefault("as_of", datetime.fromtimestamp(path.stat().st_mtime, UTC))
        return PriceBook.model_validate(data)
    except yaml.YAMLError as exc:
        raise InvalidInput("price_book", f"{path}: not YAML: {exc}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidInput("price_book", f"{path}: {where}: {first['msg']}") from exc
