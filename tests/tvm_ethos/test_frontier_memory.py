"""What a stream touches is what its plan predicted, for every Proposal the planner may
choose, not only the one it chooses today (issue 28): every frontier Proposal of a shipped
model is streamed (``tests/helpers/frontier_streams.py``) and each must execute its plan
("plan", no operator beyond its memory) touching exactly its peak (emulated SRAM plus the
reserved weights above it)."""
from __future__ import annotations

import pytest

from tests.helpers.frontier_streams import frontier_streams
from tests.helpers.models import model_path

pytest.importorskip("ethosu.vela")

CASES = [
    # resnet8's frontier held 15 Proposals on the Ethos-U55 (and 4 on the U65) whose first-fit
    # arenas outgrew the plan by up to 5,088 B
    pytest.param("resnet8_cifar", "ethos-u55-128", marks=pytest.mark.slow),
    pytest.param("resnet8_cifar", "ethos-u65-256", marks=pytest.mark.slow),
    pytest.param("ds_cnn_kws", "ethos-u55-128", marks=pytest.mark.slow),
    pytest.param("ds_cnn_kws", "ethos-u65-256", marks=pytest.mark.slow),
    pytest.param("mobilenet_v1_0.25_96", "ethos-u55-128", marks=pytest.mark.slow),
    pytest.param("mobilenet_v1_0.25_96", "ethos-u65-256", marks=pytest.mark.slow),
    pytest.param("tflite-micro/person_detect", "ethos-u55-128", marks=pytest.mark.slow),
    pytest.param("tflite-micro/person_detect", "ethos-u65-256", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("model, accelerator", CASES)
def test_every_frontier_proposal_streams_exactly_its_planned_memory(model, accelerator):
    rows = list(frontier_streams(model_path(model).read_bytes(), accelerator))
    assert len(rows) > 1
    off = [f"Proposal {r.index} of {r.frontier}: planned {r.planned:,} B, touched "
           f"{r.touched:,} B ({r.schedule})" for r in rows if not r.realizes_plan]
    assert not off, "\n".join(off)
