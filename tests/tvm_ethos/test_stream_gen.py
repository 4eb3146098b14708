"""Command streams generated from tvm-ethos's own lowering (backends/ethos_u/stream_gen.py),
run on the functional model (ethosu_stream), against the "tir" emulator of the same subgraph:
every output bit-exact, for inputs whose outputs vary with the input."""

import dataclasses

import numpy as np
import pytest
import tvm
from tvm import te

import tvm_ethos
from tests.helpers.models import MODELS_DIR
from tvm_ethos.backends.ethos_u.npu_ops import avg_pool_scale
from tvm_ethos.backends.ethos_u.stream_base import UnsupportedOperatorError
from tvm_ethos.backends.ethos_u.stream_gen import arena_layout, generate
from tvm_ethos.backends.ethos_u.stream_run import run_payload
from tvm_ethos.host.cpu.cpu_tir_pipeline import PIPELINE_NAME
from tvm_ethos.partition import partition
from tvm_ethos.pipeline.npu_subgraphs import attach_npu_constants, lower_npu_subgraphs
from tvm_ethos.targets import parse_targets

pytest.importorskip("ethosu.vela")
_CACHE = {}


def subgraph(name, accelerator="ethos-u55-128"):
    """The lowered NPU subgraph of a shipped model (by name) or of TFLite bytes."""
    key = (name, accelerator)
    if key not in _CACHE:
        src = name if isinstance(name, bytes) else str(MODELS_DIR / f"{name}.tflite")
        mod = tvm_ethos.load_model(src)
        tl = parse_targets(f"ethos-u -accelerator_config={accelerator},llvm", {})
        pmod, _ = partition(mod, tl)
        pmod = attach_npu_constants(pmod, {"ethos-u"})
        (lw,) = lower_npu_subgraphs(pmod).values()
        _CACHE[key] = lw
    return _CACHE[key]


def prefix(lw, n):
    """The subgraph's first ``n`` operators, the n-th one's output the result."""
    outs = [list(lw.tensors.values())[n - 1]]
    func = te.create_prim_func(list(lw.input_tensors) + list(lw.const_tensors) + outs)
    return dataclasses.replace(
        lw,
        layers=lw.layers[:n],
        layer_inputs=lw.layer_inputs[:n],
        tensors=dict(list(lw.tensors.items())[:n]),
        outputs=outs,
        primfunc=func,
    )


def emulator(lw):
    """The "tir" emulator of ``lw`` built once: a function of the inputs to the outputs."""
    lib = tvm.tirx.build(tvm.IRModule({"main": lw.primfunc}), target="llvm", pipeline=PIPELINE_NAME)
    consts = [tvm.runtime.tensor(c) for c in lw.consts]

    def emulate(xs):
        outs = [tvm.runtime.tensor(np.zeros([int(s) for s in o.shape], str(o.dtype)))
                for o in lw.outputs]
        lib(*([tvm.runtime.tensor(x) for x in xs] + consts + outs))
        return [o.numpy() for o in outs]

    return emulate


def inputs_of(lw, seed):
    rs = np.random.RandomState(seed)
    return [
        rs.randint(-128, 128, size=[int(s) for s in t.shape]).astype(str(t.dtype))
        for t in lw.input_tensors
    ]


# the operators before the final SOFTMAX (the emulator's SOFTMAX is TFLite's float kernel,
# the stream's the reference fixed-point one: whole models are checked against LiteRT in
# test_stream_models.py); ds_cnn_kws's random weights saturate its pool to one output for
# every input, so it stops at the last conv. Each model on one configuration in the default
# suite (test_stream_models.py runs the U65's and the U55-256's whole streams there too), the
# others slow.
CASES = [
    ("resnet8_cifar", "ethos-u55-128", 14),
    pytest.param("ds_cnn_kws", "ethos-u55-128", 9, marks=pytest.mark.slow),
    pytest.param("resnet8_cifar", "ethos-u65-256", 14, marks=pytest.mark.slow),
    ("ds_cnn_kws", "ethos-u55-256", 9),
]


@pytest.mark.parametrize("name,accelerator,n", CASES)
def test_stream_bit_exact_with_the_emulator(name, accelerator, n):
    lw = prefix(subgraph(name, accelerator), n)
    assert {q.kind for q in lw.layers} >= {"conv2d"}
    payload = generate(lw, accelerator)
    assert payload.driver_payload[:4] == b"COP1"
    emulate = emulator(lw)
    outs = []
    for seed in (0, 1):
        xs = inputs_of(lw, seed)
        got, stats = run_payload(payload, xs)
        (ref,) = emulate(xs)
        np.testing.assert_array_equal(got[0].reshape(ref.shape), ref)
        assert stats.macs > 0 and stats.high_water[1] <= payload.scratch_bytes
        outs.append(ref)
    assert not np.array_equal(outs[0], outs[1])  # the output follows the input


def test_arena_layout_never_overlaps_live_tensors():
    lw = subgraph("resnet8_cifar")
    offsets = arena_layout(lw)
    nbytes = {t.op.name: int(np.prod([int(s) for s in t.shape])) for t in lw.tensors.values()}
    live = {}
    for step, (out, ins) in enumerate(zip(lw.tensors.values(), lw.layer_inputs)):
        for t in list(ins) + [out]:
            if t.op.name in offsets:
                first, _ = live.get(t.op.name, (step, step))
                live[t.op.name] = (first, step)
    names = [k for k in live if k in nbytes]
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            (fa, la), (fb, lb) = live[a], live[b]
            if la < fb or lb < fa:
                continue
            oa, ob = offsets[a], offsets[b]
            assert oa + nbytes[a] <= ob or ob + nbytes[b] <= oa, (a, b)


def test_an_operator_without_a_stream_is_named():
    import tflite_builder as tb

    # an ADD broadcasting both operands: the NPU broadcasts the second one only
    model = tb.binary(np.random.RandomState(0), a_shape=(1, 1, 4, 8), b_shape=(1, 4, 1, 8))
    with pytest.raises(UnsupportedOperatorError, match="ADD: both operands broadcast") as err:
        generate(subgraph(model), "ethos-u55-128")
    assert err.value.kind == "ADD"


def test_ethos_u85_has_no_stream():
    with pytest.raises(UnsupportedOperatorError, match="Ethos-U85"):
        generate(prefix(subgraph("ds_cnn_kws"), 1), "ethos-u85-256")


@pytest.mark.parametrize("area", range(2, 65))
def test_average_pool_scale_rounds_as_tflite_for_every_int8_sum(area):
    """Brute force over every sum of ``area`` int8 values: the OFM scale an unpadded average
    pool gets (npu_ops.pool_op's explicit one for a power-of-two area, Vela's otherwise)
    rounds sum / area half away from zero, as TFLite's reference kernel does."""
    from ethosu.vela import scaling

    from ethosu_stream import rounding

    x = np.arange(-128 * area, 128 * area)
    scale, shift = avg_pool_scale(area) or scaling.quantise_pooling_scale(area, 0)
    half = area // 2
    ref = np.where(x > 0, (x + half) // area, -((-x + half) // area))
    np.testing.assert_array_equal(rounding.scale(x, scale, shift, rounding.TFL), ref)
