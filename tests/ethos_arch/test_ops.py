"""The operator vocabulary (ethos_arch.ops) against Vela's, and every per-stage table keyed by it.

Vela 5.2's ``Op``/``OperatorInfo`` and its TFLite mapping are the oracle for what an operator
is (block type, weights, unary or binary) and which TFLite builtin it stands for; the tables
of the stages (stream emitters, backend checks, emulator lowering, pattern readers) must be
keyed by ``Op`` members, and every operator the Ethos-U's patterns accept must have a stream
emitter or be listed as emulator-only.
"""
from __future__ import annotations

import inspect
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ethos_arch.ops import PART_OPS, Arity, BlockType, Op, UnknownOpError, parse_op
from tests.helpers.planner_strategies import planner_graphs

vela_operation = pytest.importorskip("ethosu.vela.operation")
vela_mapping = pytest.importorskip("ethosu.vela.tflite_mapping")
BuiltinOperator = pytest.importorskip("ethosu.vela.tflite.BuiltinOperator").BuiltinOperator

VelaOp = vela_operation.Op
BOTH = [op for op in Op if op.info.vela is not None]


def _vela_block(op) -> str:
    return op.info.block_type.name.lower().replace("_", "")


def test_most_operators_have_a_vela_counterpart():
    # the check below is only as strong as the operators it reaches
    assert len(BOTH) >= 25


@pytest.mark.parametrize("op", BOTH, ids=str)
def test_info_agrees_with_velas_operator_info(op):
    vela = VelaOp[op.info.vela].info
    assert vela.block_type.name.lower() == _vela_block(op)
    assert bool(vela.indices.weights) == op.info.has_weights
    if vela.block_type.name == "ElementWise":
        assert vela.is_unary == op.info.unary
        assert op.info.elementwise


@pytest.mark.parametrize("op", [op for op in BOTH if op.info.tflite_name], ids=str)
def test_tflite_builtin_is_the_one_vela_maps_to_the_same_operator(op):
    code = getattr(BuiltinOperator, op.info.tflite_name)
    assert vela_mapping.builtin_operator_map[code][0] is VelaOp[op.info.vela]


@pytest.mark.parametrize("op", list(Op), ids=str)
def test_tflite_name_is_a_tflite_builtin_or_the_kinds_capitals(op):
    if op.info.tflite_name is None:
        assert op.tflite_name == op.value.upper()
    else:
        assert hasattr(BuiltinOperator, op.tflite_name)


def test_lut_and_elementwise_flags_follow_the_block_types():
    for op in Op:
        assert op.info.elementwise == (op.info.block_type is BlockType.ELEMENTWISE)
        assert op.info.binary == (op.info.arity is Arity.TWO)
        # a table operator reads one feature map; a pure data move has no weights
        if op.info.lut:
            assert op.info.unary
        if op.info.data_move:
            assert not op.info.has_weights and not op.info.lut


@given(st.sampled_from(list(Op)))
def test_op_is_its_json_string(op):
    assert parse_op(op.value) is op
    assert json.dumps({op: op}) == json.dumps({op.value: op.value})
    assert f"{op}" == op.value and hash(op) == hash(op.value)


@given(st.text(max_size=20).filter(lambda s: s not in {op.value for op in Op}))
def test_an_unknown_kind_is_one_error_naming_it_and_the_known_ones(name):
    with pytest.raises(UnknownOpError) as e:
        parse_op(name, "parts[3].kind")
    msg = str(e.value)
    assert msg.startswith("parts[3].kind: unknown operator kind")
    assert repr(name) in msg and "conv2d" in msg and "\n" not in msg.replace(name, "")


@settings(max_examples=40, deadline=None)
@given(planner_graphs())
def test_every_planner_part_kind_is_a_part_op(g):
    assert all(isinstance(p.kind, Op) and p.kind in PART_OPS for p in g.parts)


def test_unknown_json_kinds_stay_opaque_parts_of_their_name():
    from planner.graph import part_kind

    assert part_kind("conv2d") is Op.CONV2D
    assert part_kind("nms") == "nms" and not isinstance(part_kind("nms"), Op)


# ------------------------------------------------------------------ the stages' tables
def _tables() -> dict[str, dict]:
    from tvm_ethos.backends import ethos_n, ethos_u
    from tvm_ethos.backends.ethos_u import ops_movement
    from tvm_ethos.backends.ethos_u.stream_ops import STREAM_OPS
    from tvm_ethos.compute import te_ops
    from tvm_ethos.emulator import part_matchers
    from tvm_ethos.patterns import _DATA_MOVEMENT_READERS

    return {
        "ethos_u.stream_ops.STREAM_OPS": STREAM_OPS,
        "ethos_u.CHECKS": ethos_u.CHECKS,
        "ethos_n.CHECKS": ethos_n.CHECKS,
        "ethos_u.ops_movement._LOWERINGS": ops_movement._LOWERINGS,
        "compute.te_ops.LOWERINGS": te_ops.LOWERINGS,
        "emulator.part_matchers._DATA_MOVEMENT_PARTS": part_matchers._DATA_MOVEMENT_PARTS,
        "patterns._DATA_MOVEMENT_READERS": _DATA_MOVEMENT_READERS,
    }


def test_every_tables_keys_are_op_members():
    for name, table in _tables().items():
        bad = [k for k in table if not isinstance(k, Op)]
        assert not bad, f"{name} is keyed by {bad}"


def test_every_pattern_kind_is_an_op():
    from tvm_ethos.patterns import pattern_variants

    kinds = [k for k, _, _ in pattern_variants()]
    assert kinds and all(isinstance(k, Op) for k in kinds)


def test_every_operator_ethos_u_accepts_has_a_stream_emitter_or_is_emulator_only():
    from tvm_ethos.backends.ethos_u import CHECKS
    from tvm_ethos.backends.ethos_u.stream_ops import EMULATOR_ONLY, STREAM_OPS
    from tvm_ethos.patterns import pattern_variants

    # a conv2d pattern also yields depthwise convolutions (read_qop)
    matched = {k for k, _, _ in pattern_variants()} | {Op.DEPTHWISE_CONV2D}
    accepted = matched & set(CHECKS)
    missing = accepted - set(STREAM_OPS) - EMULATOR_ONLY
    assert not missing, f"accepted for ethos-u, no stream emitter: {sorted(missing)}"
    assert not (EMULATOR_ONLY & set(STREAM_OPS))
    # every operator the emulator lowers exactly is one the stream or the emulator knows
    from tvm_ethos.compute.te_ops import LOWERINGS, NPU_ONLY_LOWERINGS
    assert accepted <= set(LOWERINGS) | set(NPU_ONLY_LOWERINGS)
    assert not set(LOWERINGS) & set(NPU_ONLY_LOWERINGS)


def test_stream_emitters_are_consistent():
    from tvm_ethos.backends.ethos_u.stream_ops import (
        LEAKY_RELU16,
        SOFTMAX16,
        STREAM_OPS,
        Extent,
        Form,
    )

    # an int16 LEAKY_RELU and an int16 SOFTMAX are the rows picked by their type
    # (stream_ops.emitter)
    for op, em in list(STREAM_OPS.items()) + [(Op.LEAKY_RELU, LEAKY_RELU16),
                                              (Op.SOFTMAX, SOFTMAX16)]:
        if em.form is Form.BLOCK:
            assert em.build is not None and em.sequence is None, op
        if em.form in (Form.SEQUENCE, Form.MOVEMENT):
            assert em.sequence is not None and em.build is None, op
        if em.views is not None:
            assert em.extent is Extent.WHOLE, op  # over whole tensors only
        if em.form is Form.SEQUENCE:
            # over whole tensors, or a stripe's box of them with its own working memory
            assert em.extent is Extent.WHOLE or em.work_bytes is not None, op
        if em.boxed:
            # over the stripe's own boxes: its working memory is sized per box
            # (stream_cascade._work_bytes), as the planner holds it (``work``)
            assert em.work is not None, op
        if em.work is not None:
            assert "box" in inspect.signature(em.work_bytes).parameters, op
        if em.stageable:
            assert em.constants is not None and op.info.has_weights, op
        # a windowed operator reads a window of its input: a pool or a convolution
        if em.geometry is not None:
            assert op.info.block_type in (BlockType.POOLING, BlockType.CONVOLUTION_MXN,
                                          BlockType.CONVOLUTION_DEPTHWISE), op
