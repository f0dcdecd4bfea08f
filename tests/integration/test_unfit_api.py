"""Over HTTP: a served quote (its estimator the request guard's) rejects the cards on which nothing
fits without their estimates (``estimate.estimate_or_unfit``, through the guard's ``or_unfit``), and
answers exactly as with every estimate made."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

import optimizer.candidates.estimator as cand_estimator
from optimizer.estimator.estimate import Unfit, clear_cache, estimate
from service.api.app import create_app
from service.settings import Settings

# A full fine-tune of 1.5 B: on the smaller cards no recipe fits.
BODY = {"workload": {"model": "qwen2.5-1.5b", "method": "full", "tokens": 2e8}, "runs": 2, "top": 10}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    db = tmp_path_factory.mktemp("unfit") / "gpucost.sqlite"
    # No answer cache: both answers below are computed.
    with TestClient(create_app(Settings(db_url=f"sqlite:///{db}", answer_cache=False))) as c:
        yield c


def _quote(client: TestClient) -> dict[str, Any]:
    clear_cache()  # every estimate made by the path asked, none kept from the other
    r = client.post("/v1/quote", json=BODY)
    assert r.status_code == 200, r.text
    q = r.json()
    q["solver"].pop("seconds", None)
    for o in [q["best"], q["fastest"], *q["options"]]:
        o.pop("price_age_days", None)
    return q


@pytest.mark.python_only  # patches what the compiled callers call directly
def test_a_served_quote_rejects_what_cannot_fit_without_estimating_it(client: TestClient, unfits_taken: list[Unfit],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    shortcut = _quote(client)
    assert len(unfits_taken) > 10  # reached through the guard's ``or_unfit``: it offers none, none are taken
    monkeypatch.setattr(cand_estimator, "estimate_or_unfit", estimate)
    assert shortcut == _quote(client)
    assert any(g["reason"] == "insufficient VRAM" for g in shortcut["rejected"])
    clear_cache()
