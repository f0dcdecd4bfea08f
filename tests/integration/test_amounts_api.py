"""Over HTTP: a quote for tokens T answered right after a quote for other tokens (the estimates
and configurations kept for the job moved to T) is the quote for T computed cold, figure for figure."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from optimizer.estimator.estimate import clear_cache
from service.api.app import create_app
from service.settings import Settings

WORKLOAD = {"model": "qwen2.5-0.5b", "method": "lora", "seq_len": 512}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    db = tmp_path_factory.mktemp("amounts") / "gpucost.sqlite"
    # No answer cache: every answer below is computed.
    with TestClient(create_app(Settings(db_url=f"sqlite:///{db}", answer_cache=False))) as c:
        yield c


def _quote(client: TestClient, tokens: float, **constraints: Any) -> dict[str, Any]:
    r = client.post("/v1/quote", json={"workload": {**WORKLOAD, "tokens": tokens}, "runs": 2, "top": 5,
                                       "constraints": constraints})
    assert r.status_code == 200, r.text
    q = r.json()
    q["solver"].pop("seconds", None)
    return q


@pytest.mark.parametrize("constraints", [{}, {"allow_spot": True, "deadline_hours": 12}])
def test_quote_after_other_tokens_equals_the_cold_quote(client: TestClient, constraints: dict[str, Any]) -> None:
    clear_cache()
    cold = _quote(client, 7.5e8, **constraints)
    clear_cache()
    first = _quote(client, 2.5e7, **constraints)
    after = _quote(client, 7.5e8, **constraints)
    assert after == cold
    # The two questions are different answers: hours follow the tokens (30x here).
    assert after["best"]["hours"] > 5 * first["best"]["hours"]


def test_a_new_token_count_makes_no_configuration_anew(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every (GPU, GPUs per node) group kept for the job moves to the new amount (``KeptMoves``):
    # none is made again by ``_configs``, whose figures the moved ones equal (test_moved_configs.py).
    from optimizer.candidates import cloud

    clear_cache()
    first = _quote(client, 3e7)
    made: list[int] = []
    real = cloud._configs

    def counting(*args: Any, **kwargs: Any) -> Any:
        made.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(cloud, "_configs", counting)
    moved = _quote(client, 9e8)
    assert made == []
    assert moved["best"]["hours"] > 5 * first["best"]["hours"]
    monkeypatch.setattr(cloud, "_configs", real)
    clear_cache()
    assert _quote(client, 9e8) == moved  # and the moved answer is the cold one
