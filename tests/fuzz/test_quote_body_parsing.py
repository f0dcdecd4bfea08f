"""The quick quote route (``service.api.quick_quote``) reads a body with pydantic's own JSON parser
(``QuoteRequest.model_validate_json``); FastAPI's route reads it with ``json.loads`` and then
validates the dict. The quick route answers only what it takes, and hands every body it refuses to
FastAPI's route. So what must hold, for any bytes: a body pydantic takes as JSON is one that
``json.loads`` reads too, and that the model takes from that reading as the same request.

Bodies start from real quote requests (``examples/quote.json``, models given by preset, by
dimensions and by a Hugging Face config) with hostile values put in, written by ``json.dumps`` in
its several ways, then cut, spliced, prefixed and suffixed at the byte level.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.schemas import QuoteRequest

EXAMPLE = json.loads((Path(__file__).resolve().parents[2] / "examples" / "quote.json").read_text())
FUZZ = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])

MODELS: list[Any] = [
    "llama-3-8b", "qwen2.5-0.5b", "bert-base", "no-such-model", "",
    {"params_b": 1.5, "name": "mine"},
    {"params_b": 0.35, "layers": 24, "hidden": 1024, "heads": 16, "vocab": 50257},
    {"hf_config": {"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16,
                   "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 8192,
                   "vocab_size": 128256, "rope_scaling": {"type": "dynamic", "factor": 2.0}}},
]
hostile: st.SearchStrategy[Any] = st.one_of(
    st.floats(min_value=1, max_value=1e12),  # mostly valid figures
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, -1, 0.5, 1e999, 2**63, True, False, None, "", "2e7", "bf16", "aws", [], {}]),
    st.text(max_size=6),
)
FIELDS = {
    "workload": ["model", "method", "precision", "tokens", "seq_len", "micro_batch_size", "lora_rank"],
    "constraints": ["deadline_hours", "budget_usd", "providers", "gpus", "allow_spot", "max_gpus"],
    "": ["runs", "top", "use_calibration"],
}


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    body = json.loads(json.dumps(EXAMPLE))
    body["workload"]["model"] = draw(st.sampled_from(MODELS))
    # Mostly whole requests: the property is about the bodies the model takes.
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 1, 2]))):
        part = draw(st.sampled_from(sorted(FIELDS)))
        name = draw(st.sampled_from(FIELDS[part]))
        (body[part] if part else body)[name] = draw(hostile)
    return body


def _text(body: dict[str, Any], style: int) -> bytes:
    if style == 0:
        return json.dumps(body).encode()
    if style == 1:
        return json.dumps(body, ensure_ascii=False).encode()
    if style == 2:
        return json.dumps(body, indent=2, separators=(",", " : ")).encode()
    return json.dumps(body, separators=(",", ":")).encode()


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    raw = _text(draw(requests()), draw(st.integers(0, 3)))
    kind = draw(st.sampled_from([0, 0, 0, 1, 2, 3, 4, 5]))
    if kind == 1 and raw:  # a byte cut out
        i = draw(st.integers(0, len(raw) - 1))
        raw = raw[:i] + raw[i + 1:]
    elif kind == 2:  # a byte put in
        i = draw(st.integers(0, len(raw)))
        raw = raw[:i] + bytes([draw(st.integers(0, 255))]) + raw[i:]
    elif kind == 3:
        raw = draw(st.sampled_from([b"", b"\xef\xbb\xbf", b" \t\r\n", b"\x00", b"\xff"])) + raw
    elif kind == 4:
        raw += draw(st.sampled_from([b"\n", b" x", b"{}", b"\x00", b",", b"]"]))
    elif kind == 5:
        raw = raw.decode().encode(draw(st.sampled_from(["utf-16", "utf-8-sig", "utf-32"])))
    return raw


def _check(raw: bytes) -> None:
    try:
        quick = QuoteRequest.model_validate_json(raw)
    except Exception:  # noqa: BLE001 - refused: FastAPI's route answers it
        return
    via_loads = QuoteRequest.model_validate(json.loads(raw))  # FastAPI's reading must take it too
    assert via_loads == quick
    assert via_loads.model_dump_json() == quick.model_dump_json()


def test_the_requests_the_bodies_start_from_are_taken() -> None:
    """So the property below is asked of bodies the model takes, not only of refused ones."""
    taken = 0
    for model in MODELS:
        body = json.loads(json.dumps(EXAMPLE))
        body["workload"]["model"] = model
        for style in range(4):
            try:
                QuoteRequest.model_validate_json(_text(body, style))
            except ValueError:
                continue
            taken += 1
    assert taken >= 4 * (len(MODELS) - 1)  # all but the empty model name, written every way


@FUZZ
@given(bodies())
def test_a_body_the_quick_route_takes_is_taken_alike_from_json_loads(raw: bytes) -> None:
    _check(raw)


@pytest.mark.parametrize("raw", [
    b'{"workload": {"model": "bert-base", "tokens": 1e7}, "workload": {"model": "llama-3-8b", "tokens": 2e7}}',
    b'{"workload": {"model": "bert-base", "tokens": NaN}}',
    b'{"workload": {"model": "bert-base", "tokens": Infinity}}',
    b'{"workload": {"model": "bert-base", "tokens": 1e400}}',
    b'{"workload": {"model": "bert-base", "tokens": 123456789012345678901234567890}}',
    b'{"workload": {"model": "bert-base", "tokens": "2.5e7"}}',
    b'{"workload": {"model": "bert-base", "tokens": 2e7}, "runs": 2.0}',
    b'{"workload": {"model": {"params_b": 1.5, "name": "\\u00e9\\ud83d\\ude00"}, "tokens": 2e7}}',
    b'{"workload": {"model": {"hf_config": {"model_type": "llama", "x": [1, 2.5, null, {"y": 10000000000000000000000}]}}}}',
])
def test_edge_bodies_are_taken_alike_or_refused(raw: bytes) -> None:
    _check(raw)


@pytest.mark.parametrize("raw", [
    b'\xef\xbb\xbf{"workload": {"model": "bert-base", "tokens": 2e7}}',
    '{"workload": {"model": "bert-base", "tokens": 2e7}}'.encode("utf-16"),
    b'{"workload": {"model": "bert-\\ud800", "tokens": 2e7}}',
])
def test_pydantic_refuses_some_bodies_json_loads_reads_and_fastapi_answers_those(raw: bytes) -> None:
    json.loads(raw)  # FastAPI's route reads these ...
    with pytest.raises(ValueError):  # ... and the quick route hands them to it
        QuoteRequest.model_validate_json(raw)
