"""Every parser of outside input, fed what hypothesis makes of it: it answers with sane values or
a named error, never a crash, a hang, a negative or non-finite number.

HF ``config.json`` (``Workload`` -> ``resolve_model`` -> ``estimate``), SkyPilot ``vms.csv``
(``parse_vms_csv``), AutoDL snapshot files (``offers_from_csv``) and AWS Price List JSON
(``on_demand_prices``). Inputs start from real rows (the reference catalog and the bundled files)
and have fields replaced with hostile values.
"""

from __future__ import annotations

import csv
import io
import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from optimizer.errors import GpucostError
from optimizer.offer import Offer

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "reference" / "skypilot-catalog"
AS_OF = datetime(2026, 11, 1, tzinfo=UTC)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

hostile_numbers = st.one_of(
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=False),  # JSON has no NaN; inf arrives as 1e999
    st.sampled_from([0, -1, 1e308, 10**30, 0.5, 2**63, True, False]),
    st.text(max_size=8),
    st.none(),
    st.lists(st.integers(), max_size=2),
)
hostile_cells = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", "nan", "inf", "-inf", "1e308", "-3", "0", "1e-300", "2.0-1.0", "9" * 40, "NaN"]),
    st.floats(allow_nan=True).map(repr),
    st.integers(min_value=-(10**12), max_value=10**12).map(str),
)


def _sane_offers(offers: list[Offer]) -> None:
    for o in offers:
        assert o.gpu_count > 0 and math.isfinite(o.gpu_count)
        for price in (o.price_hour, o.spot_price_hour, o.price_hour_native):
            assert price is None or (math.isfinite(price) and price > 0), o
        assert o.gpu_vram_gb is None or (math.isfinite(o.gpu_vram_gb) and o.gpu_vram_gb >= 0)


# -- HF config.json -------------------------------------------------------------------------

LLAMA = {
    "model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 32,
    "num_key_value_heads": 8, "intermediate_size": 8192, "vocab_size": 128256,
}
BERT = {
    "model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
    "intermediate_size": 3072, "vocab_size": 30522, "type_vocab_size": 2,
}
FIELDS = sorted({*LLAMA, *BERT, "head_dim", "max_position_embeddings", "n_layer", "n_embd", "d_model"} - {"model_type"})


@FUZZ
@given(
    base=st.sampled_from([LLAMA, BERT]),
    changes=st.dictionaries(st.sampled_from(FIELDS), hostile_numbers, min_size=1, max_size=4),
)
def test_hf_config_is_priced_sanely_or_refused(base: dict[str, Any], changes: dict[str, Any]) -> None:
    from optimizer.estimator.estimate import estimate
    from optimizer.estimator.shapes import resolve_model
    from optimizer.estimator.workload import Workload

    cfg = {**base, **changes}
    try:
        workload = Workload.model_validate({"model": {"hf_config": cfg}, "tokens": 1e8})
        shape = resolve_model(workload.model)
        est = estimate(workload, "A100-80GB", 1)
    except (ValidationError, GpucostError):
        return
    assert shape.params > 0
    assert est.hours > 0 and math.isfinite(est.hours)
    assert est.memory_gb.total_per_gpu > 0 and math.isfinite(est.memory_gb.total_per_gpu)


@FUZZ
@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=40,
))
def test_any_json_as_hf_config_is_refused_or_read(cfg: Any) -> None:
    from optimizer.estimator.shapes import resolve_model
    from optimizer.estimator.workload import Workload

    try:
        workload = Workload.model_validate({"model": {"hf_config": cfg}})
        resolve_model(workload.model)
    except (ValidationError, GpucostError):
        pass


# -- SkyPilot vms.csv -----------------------------------------------------------------------

def _rows(cloud: str, n: int = 40) -> tuple[list[str], list[dict[str, str]]]:
    text = (REFERENCE / cloud / "vms.csv").read_text(encoding="utf-8")
    reader = csv.DictReader(io.StringIO(text))
    rows = [r for r in reader if r.get("AcceleratorName")][:n]
    return list(reader.fieldnames or []), rows


def _csv(header: list[str], rows: list[dict[str, str]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=header, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


@FUZZ
@given(
    cloud=st.sampled_from(["aws", "gcp", "lambda", "runpod", "vast"]),
    edits=st.lists(
        st.tuples(st.integers(min_value=0, max_value=39), st.sampled_from(
            ["InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB", "Price",
             "SpotPrice", "Region", "AvailabilityZone", "GpuInfo"]), hostile_cells),
        min_size=1, max_size=10,
    ),
)
def test_skypilot_csv_rows_parse_sanely(cloud: str, edits: list[tuple[int, str, str]]) -> None:
    from pricing.adapters.skypilot_csv import ImportReport, parse_vms_csv

    header, rows = _rows(cloud)
    rows = [dict(r) for r in rows]
    for i, column, value in edits:
        if rows and column in header:
            rows[i % len(rows)][column] = value
    try:
        offers = parse_vms_csv(cloud, _csv(header, rows), f"skypilot-catalog:{cloud}", AS_OF, ImportReport())
    except GpucostError:
        return
    _sane_offers(offers)


@FUZZ
@given(st.text(max_size=400))
def test_skypilot_csv_of_any_text_does_not_crash(text: str) -> None:
    from pricing.adapters.skypilot_csv import ImportReport, parse_vms_csv

    try:
        _sane_offers(parse_vms_csv("lambda", text, "skypilot-catalog:lambda", AS_OF, ImportReport()))
    except GpucostError:
        pass


# -- AutoDL snapshot files ------------------------------------------------------------------

AUTODL_COLUMNS = ["provider", "product", "gpu", "max_gpus", "price_per_gpu_hour", "currency",
                  "billing_increment_s", "as_of", "confidence", "source"]
AUTODL_ROW = {
    "provider": "autodl", "product": "RTX 4090 (per card)", "gpu": "RTX4090", "max_gpus": "8",
    "price_per_gpu_hour": "2.5-3.5", "currency": "CNY", "billing_increment_s": "", "as_of": "2025-10-01",
    "confidence": "low", "source": "fuzz",
}


@FUZZ
@given(st.dictionaries(st.sampled_from(AUTODL_COLUMNS), hostile_cells, min_size=1, max_size=4))
def test_autodl_rows_parse_sanely_or_name_the_problem(changes: dict[str, str]) -> None:
    from pricing.adapters.autodl import offers_from_csv

    text = _csv(AUTODL_COLUMNS, [{**AUTODL_ROW, **changes}])
    try:
        offers = offers_from_csv(text, "autodl-fuzz.csv")
    except GpucostError:
        return
    assert len(offers) <= 64
    _sane_offers(offers)


# -- AWS Price List JSON --------------------------------------------------------------------

def _item(usd: Any, unit: Any = "Hrs", itype: Any = "p4d.24xlarge") -> dict[str, Any]:
    return {
        "product": {"attributes": {
            "instanceType": itype, "operatingSystem": "Linux", "tenancy": "Shared",
            "preInstalledSw": "NA", "capacitystatus": "Used", "operation": "RunInstances",
        }},
        "terms": {"OnDemand": {"T": {"priceDimensions": {"D": {"unit": unit, "pricePerUnit": {"USD": usd}}}}}},
    }


@FUZZ
@given(
    st.lists(
        st.one_of(
            st.builds(_item, hostile_cells, st.sampled_from(["Hrs", "Quantity", None]),
                      st.sampled_from(["p4d.24xlarge", "g5.xlarge", "", "x"])),
            st.text(max_size=30),
            st.builds(json.dumps, st.builds(_item, hostile_numbers)),
        ),
        max_size=8,
    )
)
def test_price_list_items_give_positive_finite_rates(items: list[Any]) -> None:
    from pricing.adapters.aws import on_demand_prices

    try:
        prices = on_demand_prices(items)
    except GpucostError:
        return
    for entry in prices.values():
        assert math.isfinite(entry["usd"]) and entry["usd"] > 0
