"""Issue 19's small rules: which GPUs train a global batch, subscription sessions, GPU families."""

from __future__ import annotations

import pytest

from optimizer.candidates.batch import cannot_keep, data_parallel_width
from optimizer.errors import UnknownGpu
from optimizer.estimator.gpus import gpu_family
from optimizer.subscriptions import monthly_floor_usd, session_plan, subscription_of


@pytest.mark.parametrize(("batch", "gpus", "used"), [
    (16, 1, 1), (16, 8, 8), (16, 5, 4), (16, 3, 2), (16, 7, 4), (16, 24, 16), (16, 32, 16), (16, 64, None),
    (256, 24, 16), (7, 2, 1), (7, 4, None), (7, 7, 7),
])
def test_gpus_that_train_divide_the_batch(batch: int, gpus: int, used: int | None) -> None:
    got = data_parallel_width(batch, gpus)
    assert got == used
    if got is not None:
        assert batch % got == 0 and got <= gpus and got >= gpus / 2


def test_reason_names_batch_and_gpus() -> None:
    assert cannot_keep(16, 64) == "cannot keep global batch 16 on 64 GPUs"


def test_colab_sessions() -> None:
    pro = subscription_of("colab", "colab-pro-a100")
    plus = subscription_of("colab", "colab-pro-plus-t4")
    assert pro is not None and plus is not None and pro.plan == "Colab Pro" and plus.plan == "Colab Pro+"
    assert subscription_of("aws", "colab-pro-a100") is None
    one = session_plan(pro, 5.0, 0.25)
    assert one.sessions == 1 and one.restart_hours == 0
    seven = session_plan(pro, 7.0, 0.25)  # planned at 6 h: two sessions, one restart
    assert seven.sessions == 2 and seven.restart_hours == pytest.approx(0.25)
    assert "browser must stay open" in seven.note and "not guaranteed" in seven.note
    assert session_plan(plus, 7.0, 0.25).sessions == 1
    assert monthly_floor_usd(pro, 3.0) == pro.monthly_usd and monthly_floor_usd(pro, 30.0) == 30.0


def test_h100_is_a_family_and_boards_are_themselves() -> None:
    assert set(gpu_family("H100")) == {"H100", "H100-PCIE"}
    assert set(gpu_family("h100")) == {"H100", "H100-PCIE"}
    assert gpu_family("H100-SXM") == ("H100",)
    assert gpu_family("H100 PCIe") == ("H100-PCIE",)
    assert gpu_family("A100") == ("A100",)
    with pytest.raises(UnknownGpu):
        gpu_family("Z9000")
