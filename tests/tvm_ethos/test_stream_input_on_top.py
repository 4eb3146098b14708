"""A planned arena layout may end with the network's input, which the stream reads in place
on an Ethos-U55: the stream's memory check counts it as touched. ds_cnn_kws on ethos-u55-128
within 16,682 B (the frontier Proposal of that memory, which ``--optimise Size`` chose while
its rule weighed weight DMA too) puts its 490 B input at the top of the arena."""
import numpy as np
from conftest import model_path, oracle, random_inputs

import tvm_ethos

#: the frontier Proposal whose layout ends with the input (bytes)
PEAK = 16_682


def test_an_arena_that_ends_with_the_input_is_the_plans_peak_and_exact():
    path = str(model_path("ds_cnn_kws"))
    cm = tvm_ethos.compile(tvm_ethos.load_model(path), target="ethos-u,llvm",
                           accelerator_config="ethos-u55-128", budget=PEAK, cache_dir=False)
    (sub,) = cm.plan_report["subgraphs"].values()
    (stream,) = cm.plan_report["streams"].values()
    assert sub["peak_memory_bytes"] == PEAK
    assert stream["realizes_plan"]
    assert stream["sram_high_water_bytes"] == PEAK
    assert not stream.get("untouched_top_bytes")
    xs = random_inputs(path, np.random.RandomState(0))
    got = cm.run(xs)
    got = got if isinstance(got, (list, tuple)) else [got]
    refs = oracle(path, xs)
    assert len(got) == len(refs) > 0
    for g, ref in zip(got, refs):
        assert np.array_equal(np.asarray(g).reshape(ref.shape), ref)
