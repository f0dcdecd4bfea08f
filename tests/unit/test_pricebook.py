"""The user's price book: discounts, negotiated prices, on-prem nodes; YAML and CSV."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from optimizer.errors import InvalidInput, UnknownGpu
from optimizer.offer import Offer
from pricing.pricebook import PriceBook, apply_price_book, load_price_book

AS_OF = datetime(2026, 11, 30, tzinfo=UTC)


def offer(provider: str, itype: str, region: str, price: float | None, spot: float | None = None, **kw) -> Offer:
    base = dict(
        provider=provider, region=region, instance_type=itype, gpu="A100", gpu_count=8,
        gpu_vram_gb=40, price_hour=price, spot_price_hour=spot, price_hour_native=price,
        spot_price_hour_native=spot, source=f"{provider}:test", as_of=AS_OF,
    )
    base.update(kw)
    return Offer(**base)


OFFERS = [
    offer("aws", "p4d.24xlarge", "us-east-1", 21.957642, 2.4655),
    offer("aws", "p4d.24xlarge", "us-west-2", 21.957642),
    offer("gcp", "a2-highgpu-8g", "us-central1", 29.38, 14.0),
    offer("lambda", "gpu_8x_a100", "us-east-1", 15.92),
]

YAML_BOOK = """
name: acme-2026
as_of: 2026-11-01
discounts:
  AWS: 0.9
  gcp: {on_demand: 0.8, spot: 1.0}
negotiated:
  - {provider: aws, instance_type: p4d.24xlarge, region: us-east-1, price_hour: 18.0}
onprem:
  - {name: lab-4x4090, gpu: "rtx 4090", gpus_per_node: 4, gpu_hour_usd: 0.35, vcpus: 32, ram_gb: 128}
"""


def test_yaml_book_applies_negotiated_then_discount_then_adds_onprem(tmp_path: Path) -> None:
    path = tmp_path / "book.yaml"
    path.write_text(YAML_BOOK)
    book = load_price_book(path)
    out = apply_price_book(OFFERS, book)
    by_key = {(o.provider, o.instance_type, o.region): o for o in out}

    deal = by_key[("aws", "p4d.24xlarge", "us-east-1")]
    assert deal.price_hour == 18.0
    assert deal.spot_price_hour == 2.4655  # no negotiated spot: the market price stays
    assert deal.source == "aws:test+pricebook:acme-2026"

    # The negotiated price is regional; elsewhere the provider discount applies.
    assert by_key[("aws", "p4d.24xlarge", "us-west-2")].price_hour == pytest.approx(21.957642 * 0.9)
    gcp = by_key[("gcp", "a2-highgpu-8g", "us-central1")]
    assert gcp.price_hour == pytest.approx(29.38 * 0.8) and gcp.spot_price_hour == 14.0

    untouched = by_key[("lambda", "gpu_8x_a100", "us-east-1")]
    assert untouched == OFFERS[3]

    lab = by_key[("onprem", "lab-4x4090", "onprem")]
    assert (lab.gpu, lab.gpu_count, lab.price_hour) == ("RTX4090", 4, pytest.approx(1.4))
    assert lab.source == "pricebook:acme-2026" and lab.as_of == datetime(2026, 11, 1, tzinfo=UTC)


def test_apply_is_pure() -> None:
    before = [o.model_copy() for o in OFFERS]
    apply_price_book(OFFERS, PriceBook(name="b", discounts={"aws": 0.5}))
    assert OFFERS == before
    assert apply_price_book(OFFERS, None) == OFFERS


def test_provider_wide_negotiated_price_and_non_usd_offer() -> None:
    cny = offer("alibaba", "ecs.gn7-c12g1.3xlarge", "cn-shanghai", 4.5, currency="CNY",
                price_hour_native=31.58)
    book = PriceBook(
        name="b",
        negotiated=[{"provider": "alibaba", "instance_type": "ecs.gn7-c12g1.3xlarge", "price_hour": 3.9}],
    )
    (changed,) = apply_price_book([cny], book)
    assert (changed.price_hour, changed.currency, changed.price_hour_native) == (3.9, "USD", 3.9)


def test_discount_scales_native_price_too() -> None:
    cny = offer("alibaba", "ecs.gn7-c12g1.3xlarge", "cn-shanghai", 4.5, currency="CNY",
                price_hour_native=31.58)
    (changed,) = apply_price_book([cny], PriceBook(name="b", discounts={"alibaba": 0.5}))
    assert changed.price_hour_native == pytest.approx(15.79)
    assert changed.currency == "CNY"


def test_csv_book(tmp_path: Path) -> None:
    path = tmp_path / "team.csv"
    path.write_text(
        "kind,provider,instance_type,region,factor,spot_factor,price_hour,name,gpu,gpus_per_node,gpu_hour_usd\n"
        "discount,aws,,,0.9,0.95,,,,,\n"
        "negotiated,lambda,gpu_8x_a100,,,,14.0,,,,\n"
        "onprem,,,,,,,k8s-a100,A100,8,1.1\n"
    )
    book = load_price_book(path)
    assert book.name == "team"
    out = {(o.provider, o.region, o.instance_type): o for o in apply_price_book(OFFERS, book)}
    assert out[("aws", "us-east-1", "p4d.24xlarge")].spot_price_hour == pytest.approx(2.4655 * 0.95)
    assert out[("lambda", "us-east-1", "gpu_8x_a100")].price_hour == 14.0
    assert out[("onprem", "onprem", "k8s-a100")].price_hour == pytest.approx(8.8)


@pytest.mark.parametrize(
    ("name", "text", "error"),
    [
        ("bad.yaml", "discounts: {aws: -1}", InvalidInput),
        ("bad.yaml", "discounts: [aws", InvalidInput),
        ("bad.yaml", "onprem: [{name: x, gpu: NotAGpu, gpu_hour_usd: 1}]", UnknownGpu),
        ("bad.yaml", "negotiated: [{provider: aws, instance_type: p4d.24xlarge, price_hour: 1},"
                     " {provider: aws, instance_type: p4d.24xlarge, price_hour: 2}]", InvalidInput),
        ("bad.csv", "kind,provider\nrebate,aws\n", InvalidInput),
    ],
)
def test_bad_books_are_invalid_input(tmp_path: Path, name: str, text: str, error: type) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(error) as err:
        load_price_book(path)
    assert err.value.field.startswith("price_book")


def test_missing_file_is_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        load_price_book(tmp_path / "absent.yaml")


def test_a_views_fingerprint_follows_its_book_and_rates(tmp_path: Path) -> None:
    """The fingerprint every snapshot id carries: the same for views made of the same files, and
    another for another book or another rates table (worked out once per view, which never changes)."""
    from pricing.price_view import price_view

    book = tmp_path / "book.yaml"
    book.write_text(YAML_BOOK)
    other = tmp_path / "other.yaml"
    other.write_text(YAML_BOOK.replace("AWS: 0.9", "AWS: 0.85"))
    rates = tmp_path / "fx.csv"
    rates.write_text("currency,rate_to_usd,as_of,source\nCNY,0.14,2026-11-30,test table\n")
    plain, booked = price_view(), price_view(str(book))
    assert plain.fingerprint == price_view().fingerprint
    assert booked.fingerprint == price_view(str(book)).fingerprint == booked.fingerprint
    assert len({plain.fingerprint, booked.fingerprint, price_view(str(other)).fingerprint,
                price_view(fx_file=str(rates)).fingerprint}) == 4
