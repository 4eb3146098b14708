"""Partition decisions: what went where and, for each rejection, which constraint failed."""
import numpy as np
import tflite_builder as tb
from conftest import assert_bit_exact, model_path
from tvm import relax

import tvm_ethos
from tvm_ethos.partition import partition


def _codegen_funcs(mod, name):
    return [f for _, f in mod.functions.items()
            if isinstance(f, relax.Function) and f.attrs is not None and "Codegen" in f.attrs
            and str(f.attrs["Codegen"]) == name]


def test_ds_cnn_on_ethos_n_reasons():
    mod = tvm_ethos.load_model(model_path("ds_cnn_kws"))
    rep = tvm_ethos.partition_report(mod, "ethos-n,llvm")
    by_name = {}
    for op in rep.operators:
        by_name.setdefault(op.tflite_name, []).append(op)
    first_conv = by_name["CONV_2D"][0]
    assert first_conv.placed_on == "llvm"
    assert any("kernel 10x4" in r for r in first_conv.rejections["ethos-n"])
    assert all(op.placed_on == "ethos-n" for op in by_name["DEPTHWISE_CONV_2D"])
    assert by_name["AVERAGE_POOL_2D"][0].placed_on == "llvm"
    assert any(
        "3x3 stride 1 only" in r for r in by_name["AVERAGE_POOL_2D"][0].rejections["ethos-n"]
    )
    assert any("per-channel" in r for r in by_name["FULLY_CONNECTED"][0].rejections["ethos-n"])
    assert any("not supported" in r for r in by_name["SOFTMAX"][0].rejections["ethos-n"])
    text = str(rep)
    assert "rejected by ethos-n: kernel 10x4" in text
    # every operator of the model is listed once
    assert len(rep.operators) == 12 and len({op.op_id for op in rep.operators}) == 12


def test_adjacent_npu_ops_form_one_subgraph():
    mod = tvm_ethos.load_model(model_path("resnet8_cifar"))
    pmod = partition(mod, "ethos-u,llvm")[0]
    funcs = _codegen_funcs(pmod, "ethos-u")
    assert len(funcs) == 1  # convs + residual adds + pool + conv chain: one multi-layer subgraph
    inner = [
        b
        for blk in funcs[0].body.blocks
        for b in blk.bindings
        if isinstance(b.value, relax.Function)
    ]
    assert len(inner) >= 10
    rep = tvm_ethos.partition_report(pmod)
    assert rep.summary()["ethos-u"] == len(inner)
    pmod_n = partition(mod, "ethos-n -variant=n78,llvm")[0]
    assert len(_codegen_funcs(pmod_n, "ethos-n")) >= 1


def test_constraint_violation_falls_back_with_reason():
    rs = np.random.RandomState(3)
    model = tb.conv2d(rs, in_shape=(1, 12, 12, 3), stride=(4, 4), padding="VALID", kernel=(3, 3))
    mod = tvm_ethos.load_model(model)
    cm = tvm_ethos.compile(mod, target="ethos-u,llvm")
    assert cm.partition_summary == {"llvm": 1}
    (op,) = cm.partition_report.operators
    assert op.rejections["ethos-u"] == ["strides 4x4; stride values must be in the range [1, 3]"]
    assert_bit_exact(cm, model, n_inputs=2)


def test_ethos_n_dilation_rejected_ethos_u_accepts():
    rs = np.random.RandomState(4)
    model = tb.conv2d(rs, in_shape=(1, 10, 10, 3), dilation=(2, 2))
    mod = tvm_ethos.load_model(model)
    rn = tvm_ethos.partition_report(mod, "ethos-n,llvm")
    assert rn.summary() == {"llvm": 1}
    assert any("dilation" in r for r in rn.operators[0].rejections["ethos-n"])
    ru = tvm_ethos.partition_report(mod, "ethos-u,llvm")
    assert ru.summary() == {"ethos-u": 1}


def test_depth_multiplier_rules():
    rs = np.random.RandomState(8)
    model = tb.conv2d(rs, in_shape=(1, 8, 8, 3), depthwise=True, multiplier=2)
    mod = tvm_ethos.load_model(model)
    ru = tvm_ethos.partition_report(mod, "ethos-u,llvm")
    assert ru.operators[0].rejections["ethos-u"] == [
        "depth multiplier 2 with 3 input channels; multipliers > 1 need one input channel"]
    rn = tvm_ethos.partition_report(mod, "ethos-n,llvm")
    assert rn.operators[0].rejections["ethos-n"] == ["depth multiplier 2; Ethos-N supports 1"]
    cm = tvm_ethos.compile(mod, target="ethos-u,llvm")
    assert cm.partition_summary == {"llvm": 1}
    assert_bit_exact(cm, model, n_inputs=2)


def test_two_npus_in_priority_order():
    rs = np.random.RandomState(5)
    model = tb.conv2d(rs, in_shape=(1, 10, 10, 3), dilation=(2, 2))
    rep = tvm_ethos.partition_report(tvm_ethos.load_model(model), "ethos-n,ethos-u,llvm")
    assert rep.summary() == {"ethos-u": 1}
    assert rep.operators[0].rejections["ethos-n"]


def test_model_with_no_npu_operator_runs():
    model = tb.softmax(np.random.RandomState(6), n=12)
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="ethos-n,llvm")
    assert cm.partition_summary == {"llvm": 1}
    assert_bit_exact(cm, model, n_inputs=3)


def test_unscheduled_primfuncs_exposed():
    from tvm_ethos.pipeline.npu_subgraphs import lower_npu_subgraphs

    mod = tvm_ethos.load_model(model_path("ds_cnn_kws"))
    pmod = partition(mod, "ethos-u,llvm")[0]
    subs = lower_npu_subgraphs(pmod)
    assert len(subs) == 1
    (lw,) = subs.values()
    assert lw.primfunc.attrs["op_pattern"] == 8
    assert [op.kind for op in lw.layers][:2] == ["conv2d", "depthwise_conv2d"]
    assert len(lw.consts) > 0


def test_opencl_host_seam():
    """'<npu>,opencl' compiles; the opencl subgraph's kernels run through PyOpenCL (the Relax VM
    executable keeps an llvm build of them: OpenclBackend.build_target)."""
    rs = np.random.RandomState(9)
    model = tb.conv2d(rs, kernel=(9, 3))  # too tall for Ethos-N: goes to the host backend
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="ethos-n,opencl")
    assert cm.partition_summary == {"opencl": 1}
    assert [sg.device for sg in cm.program.subgraphs] == ["opencl"]
    assert_bit_exact(cm, model, n_inputs=2)
