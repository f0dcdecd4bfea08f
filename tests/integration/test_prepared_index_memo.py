"""One process, two stores of the same prices (``service.prepared``, ``offer_groups.index_for``): a CLI
quote that reads store A's prepared file leaves A's small index in the process memo; a later
full-way answer on store B writes B's prepared files from that memo. Answers naming regions (the
frontier A's small file lacks) must stay those of the whole catalog, in memory and in B's files.

Before the fix, writing B's files computed the region frontiers from the small index's few
offers and kept them: a plan over us-east-1 and us-central1 then saw 1 of its 6 offers, and a
job whose runs a quota split over two providers kept only the runs one provider could take
(tests/integration/test_spot_and_quotas.py failed after test_decision_truth.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from optimizer.candidates.offer_groups import OfferIndex, clear_indexes
from optimizer.estimator.workload import Constraints
from pricing.snapshot.loader import load_bundled
from service.api.app import create_app
from service.cli import app
from service.prepared import folder_of, load_regions
from service.settings import Settings

runner = CliRunner()
CLI_QUOTE = ["quote", "--model", "llama-3-8b", "--method", "qlora", "--tokens", "1e8", "--json"]
REGIONS = {"providers": ["aws", "gcp"], "regions": ["us-east-1", "us-central1"], "gpus": ["A100"],
           "include_local": False}
PLAN = {"jobs": [{"name": "big", "workload": {"model": "llama-3-8b", "method": "full", "tokens": 2e9},
                  "runs_per_month": 30}], "horizon_months": 1, "constraints": REGIONS}


@pytest.fixture
def use_store(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Point the CLI at a store (no answer cache, no cloud credentials looked for)."""
    from service.settings import get_settings

    monkeypatch.setenv("GPUCOST_ANSWER_CACHE", "false")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("NO_GCE_CHECK", "true")

    def point(db_url: str) -> None:
        monkeypatch.setenv("GPUCOST_DB_URL", db_url)
        get_settings.cache_clear()

    clear_indexes()
    yield point
    get_settings.cache_clear()
    clear_indexes()


def _cli_quote() -> None:
    result = runner.invoke(app, CLI_QUOTE)
    assert result.exit_code == 0, result.output


def _plan_offers(db_url: str) -> tuple[int, list[tuple[str, str, int]]]:
    with TestClient(create_app(Settings(db_url=db_url, answer_cache=False))) as c:
        r = c.post("/v1/plan", json=PLAN)
    assert r.status_code == 200, r.text
    doc = r.json()
    return doc["rental_search"]["offers_priced"], sorted(
        (a["provider"], a["instance_type"], a["runs"]) for a in doc["assignments"])


def test_a_store_prepared_after_another_keeps_every_region_offer(tmp_path: Path, use_store: Any) -> None:
    a_url, b_url = (f"sqlite:///{tmp_path / name / 'g.sqlite'}" for name in ("a", "b"))
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    use_store(a_url)
    _cli_quote()  # the full way: writes A's prepared files
    _cli_quote()  # from A's prepared file: its small index is now the process's index of these prices
    use_store(b_url)
    _cli_quote()  # the full way on B (same prices, same snapshot id): writes B's files from the memo
    remembered = _plan_offers(b_url)
    clear_indexes()
    fresh = _plan_offers(b_url)  # what a process that never saw store A answers
    assert remembered == fresh
    assert fresh[0] == 6  # the plan priced every A100 offer of both regions
    # B's stored index for views naming regions answers them as the whole catalog does.
    (regions_file,) = sorted(folder_of(tmp_path / "b" / "g.sqlite").glob("*.regions.pickle"))
    stored = load_regions(tmp_path / "b" / "g.sqlite", regions_file.name.split("-")[0])
    assert stored is not None
    full = OfferIndex.build(load_bundled().offers)
    c = Constraints(**REGIONS)
    assert [o.model_dump() for o in stored.view(c).offers] == [o.model_dump() for o in full.view(c).offers]
    assert len(full.view(c).offers) == 6


def test_a_small_index_prepares_from_its_fuller_one_or_not_at_all() -> None:
    import pickle

    full = OfferIndex.build(load_bundled().offers)
    c = Constraints(**REGIONS)
    want = [o.model_dump() for o in full.view(c).offers]
    small = pickle.loads(pickle.dumps(full.prepared(regions=False)))
    with pytest.raises(LookupError):
        small.prepared()  # nowhere to find the region frontiers: no guessing from a few offers
    small.fall_back_to(lambda: full)
    again = small.prepared()
    assert [o.model_dump() for o in again.view(c).offers] == want
    assert [o.model_dump() for o in small.view(c).offers] == want  # and the small index is unchanged
