"""notebooks/planner_sweep.ipynb runs top to bottom without error and draws its figures."""
import base64
import os
import time

import pytest

nbformat = pytest.importorskip(
    "nbformat", reason="nbformat not installed (pip install -e '.[test]')"
)
nbclient = pytest.importorskip(
    "nbclient", reason="nbclient not installed (pip install -e '.[test]')"
)
pytest.importorskip("ipykernel", reason="ipykernel not installed (pip install -e '.[test]')")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTEBOOK = os.path.join(ROOT, "notebooks", "planner_sweep.ipynb")


@pytest.fixture(scope="module")
def executed(models_dir):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:  # the shipped notebook carries no outputs; the test makes them
        if cell.cell_type == "code":
            assert not cell.outputs, "commit the notebook with its outputs cleared"
    # The kernel imports this checkout's planner and tvm_ethos (not an installed copy's) and
    # reads the models the models_dir fixture names.
    path = os.pathsep.join(filter(None, (ROOT, os.environ.get("PYTHONPATH"))))
    env = {"TVM_ETHOS_MODELS": str(models_dir.resolve()), "PYTHONPATH": path}
    before = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    t0 = time.perf_counter()
    try:
        nbclient.NotebookClient(nb, timeout=180, kernel_name="python3",
                                resources={"metadata": {"path": os.path.dirname(NOTEBOOK)}}
                                ).execute()
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return nb, time.perf_counter() - t0


def outputs(nb):
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]


def test_runs_without_error(executed):
    nb, seconds = executed
    assert not [o for o in outputs(nb) if o.output_type == "error"]
    assert all(c.execution_count for c in nb.cells if c.cell_type == "code")
    assert seconds < 120, f"the notebook took {seconds:.0f} s; keep it under a minute"


def test_draws_its_figures(executed):
    nb, _ = executed
    pngs = [o.data["image/png"] for o in outputs(nb)
            if o.output_type in ("display_data", "execute_result") and "image/png" in o.data]
    assert len(pngs) >= 2
    for p in pngs:
        raw = base64.b64decode(p)
        assert raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) > 10_000


def test_prints_the_sweep_and_a_per_layer_table(executed):
    nb, _ = executed
    text = "".join(o.get("text", "") for o in outputs(nb) if o.output_type == "stream"
                   and o.name == "stdout")
    for name in ("ds_cnn_kws", "mobilenet_v1_0.25_96", "resnet8_cifar", "mobilenet_v1_1.0_224"):
        assert f"{name} on ethos-u55-128" in text
    assert "naive layer-by-layer" in text
    assert "casc part" in text and "total: " in text and "cascades, peak" in text
