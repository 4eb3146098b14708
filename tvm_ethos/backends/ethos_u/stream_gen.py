"""A real Ethos-U register command stream for one NPU subgraph, through Vela's Python API.

A planned subgraph's stream executes the planner's Proposal (``stream_cascade``: one
operation per stripe, rings, the plan's arena layout). Without a plan (``plan=False``),
each operator of the lowered subgraph (``LoweredSubgraph.layers``, its operands in
``layer_inputs``) becomes one ``NpuOperation`` over its whole tensors (layer by layer); every
feature map lives in the scratch arena (region 1) at an offset of :func:`arena_layout`,
weights, biases and constant operands in the read-only flash (region 0). Block configs come
from ``npu_find_block_configs``; the weights are encoded for the chosen block depth.
``npu_generate_register_command_stream`` and ``npu_create_driver_payload`` make the
:class:`EthosUPayload` that the functional model (``ethosu_stream``) runs and a TFLite Micro
exporter writes. SOFTMAX becomes a sequence of NPU operations with intermediates of its own
(``npu_softmax``; their arena is a work block of :func:`arena_layout`), MEAN one depthwise
convolution. An operator with no NPU form raises :class:`UnsupportedOperatorError` naming
it, so the caller keeps the "tir" emulator for that subgraph.

Vela is the ``vela`` extra, imported lazily (``stream_base.vela_api``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tvm_ethos.backends.ethos_u.npu_ops import (
    FmSlot,
    attach_constants,
    block_config,
    shape3,
)
from tvm_ethos.backends.ethos_u.payload import ArenaTensor, EthosUPayload
from tvm_ethos.backends.ethos_u.stream_base import (
    ALIGN,
    FLASH_REGION,
    SCRATCH_REGION,
    Flash,
    UnsupportedOperatorError,
    lut_address,
    npu_accelerator,
)
from tvm_ethos.backends.ethos_u.stream_memo import generator
from tvm_ethos.backends.ethos_u.stream_ops import Emission, Form, emitter
from tvm_ethos.backends.ethos_u.stream_payload import driver_payload


def _key(t) -> str:
    return t.op.name


def _is_alias(op) -> bool:
    """An operator whose output is its input's bytes (RESHAPE): no operation, no bytes."""
    em = emitter(op)
    return em is not None and em.form is Form.ALIAS


def work_key(step: int) -> str:
    """The arena name of the working memory of operator ``step`` (see arena_layout)."""
    return f"__work{step}"


def arena_layout(lw, work: dict[int, int] | None = None) -> dict[str, int]:
    """Offset in the scratch arena of every feature map (by TE tensor name): first fit by
    lifetime, packed to the element (as the planner counts bytes), a reshape sharing its
    input's bytes (NHWC reshapes move no data). ``work`` gives operators lowered to several
    NPU operations (SOFTMAX) bytes of their own, live only during that operator, 16-byte
    aligned, at ``offsets[work_key(step)]``."""
    alias = {}
    for q, out, ins in zip(lw.layers, lw.tensors.values(), lw.layer_inputs):
        if _is_alias(q):
            alias[_key(out)] = alias.get(_key(ins[0]), _key(ins[0]))
    size: dict[str, int] = {}
    item: dict[str, int] = {}  # NHWC feature maps need only element alignment
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    const_names = {_key(t) for t in lw.const_tensors}

    def touch(t, step):
        k = _key(t)
        if k in const_names:
            return
        root = alias.get(k, k)
        nbytes = int(np.prod([int(s) for s in t.shape])) * np.dtype(str(t.dtype)).itemsize
        size[root] = max(size.get(root, 0), nbytes)
        item[root] = np.dtype(str(t.dtype)).itemsize
        first.setdefault(root, step)
        last[root] = max(last.get(root, step), step)

    end = len(lw.layers)
    for t in lw.input_tensors:
        touch(t, -1)
    for step, (out, ins) in enumerate(zip(lw.tensors.values(), lw.layer_inputs)):
        for t in ins:
            touch(t, step)
        touch(out, step)
    for t in lw.outputs:
        touch(output_source(lw, t), end)
    for step, nbytes in (work or {}).items():
        k = work_key(step)
        size[k], item[k], first[k], last[k] = nbytes, ALIGN, step, step
    placed: list[tuple[int, int, int, int]] = []  # (offset, size, first, last)
    offsets: dict[str, int] = {}
    for root in sorted(size, key=lambda r: (first[r], -size[r], r)):
        live = sorted(
            (o, s) for o, s, lo, hi in placed if not (hi < first[root] or lo > last[root])
        )
        off = 0
        for o, s in live:
            if off + size[root] <= o:
                break
            off = max(off, -(-(o + s) // item[root]) * item[root])
        placed.append((off, size[root], first[root], last[root]))
        offsets[root] = off
    for k, root in alias.items():
        offsets[k] = offsets[root]
    return offsets


def output_source(lw, t):
    """An output copy stage (``lower_function`` adds one for an output that is an input or
    repeated) reads its source's bytes."""
    layer_names = {_key(x) for x in lw.tensors.values()}
    while _key(t) not in layer_names and t.op.input_tensors:
        t = t.op.input_tensors[0]
    return t


@generator
def generate(lw, accelerator: str) -> EthosUPayload:
    """The command stream and memory of one lowered NPU subgraph, layer by layer (a planned
    subgraph's is ``stream_cascade.generate_planned``)."""
    acc = npu_accelerator(accelerator)
    for q in lw.layers:  # before any weight is encoded
        if emitter(q) is None:
            raise UnsupportedOperatorError(
                q.tflite_name, "no NPU operation is generated for it yet (rfcs/0007 section 2)"
            )
    work = {i: n for i, q in enumerate(lw.layers)  # (an operator needing none has no block)
            if emitter(q).work_bytes is not None and (n := emitter(q).work_bytes(q))}
    offsets = arena_layout(lw, work)
    flash = Flash()
    consts = {_key(t): a for t, a in zip(lw.const_tensors, lw.consts)}
    slots: dict[str, FmSlot] = {}

    def slot(t, q=None) -> FmSlot:
        k = _key(t)
        if k in consts:  # a constant operand: a feature map in flash
            arr = np.ascontiguousarray(consts[k])
            rng = flash.add(arr.tobytes())
            return FmSlot(
                FLASH_REGION,
                rng.address,
                shape3(arr.shape, k),
                str(arr.dtype),
                q[0] if q else None,
                q[1] if q else 0,
            )
        base = slots.get(k) or FmSlot(
            SCRATCH_REGION, offsets[k], shape3(t.shape, k), str(t.dtype), None, 0
        )
        if q is None or q[0] is None:
            return base
        return dataclasses.replace(base, scale=float(q[0]), zero_point=int(q[1]))

    for t in lw.input_tensors:
        slots[_key(t)] = slot(t)
    ops = []
    for step, (q, out, ins) in enumerate(zip(lw.layers, lw.tensors.values(), lw.layer_inputs)):
        if isinstance(out, (list, tuple)):
            raise UnsupportedOperatorError(q.tflite_name, "an operator with several outputs")
        in_q = list(q.in_q) + [None] * (len(ins) - len(q.in_q))
        operands = [slot(t, iq) for t, iq in zip(ins, in_q)]
        out_q = q.out_q
        if out_q is None:  # pools and reshapes keep their input's quantization
            out_q = (operands[0].scale, operands[0].zero_point)
        ofm = slot(out, out_q)
        slots[_key(out)] = ofm
        em = emitter(q)
        if em.form is Form.ALIAS:
            continue  # the same bytes, read with another shape
        if em.sequence is not None:
            ops += em.sequence(q, operands, ofm, Emission(
                flash, lut_address(accelerator), lambda npu: block_config(npu, acc),
                offsets.get(work_key(step)), accelerator=accelerator))
            continue
        if em.before is not None:
            ops += em.before(q, flash, lut_address(accelerator))
        if em.views is not None:
            operands[0], ofm = em.views(q, operands[0], ofm)
        npu = em.build(q, operands, ofm)
        if em.constants is not None:
            attach_constants(npu, q, ofm.shape[2], acc, flash,
                             *em.constants(q, ofm.shape[2]))
        else:
            npu.block_config = block_config(npu, acc)
        npu.name = q.kind.value
        ops.append(npu)
    if not ops:
        raise UnsupportedOperatorError("an empty subgraph", "it computes nothing on the NPU")
    payload = driver_payload(ops, acc)

    def arena(t) -> ArenaTensor:
        src = output_source(lw, t)
        return ArenaTensor(
            _key(t), tuple(int(s) for s in t.shape), str(t.dtype), offsets[_key(src)]
        )

    ins = tuple(arena(t) for t in lw.input_tensors)
    outs = tuple(arena(t) for t in lw.outputs)
    scratch = max([s.offset + s.nbytes for s in slots.values() if s.region == SCRATCH_REGION]
                  + [offsets[work_key(i)] + n for i, n in work.items()])
    return EthosUPayload(accelerator, bytes(payload), bytes(flash.data), scratch, 0, ins, outs,
                         sum(work.values()))
