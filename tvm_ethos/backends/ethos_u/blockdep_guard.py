"""Vela's register command stream with a safe BLOCKDEP after a feature map with a negative
stride.

BLOCKDEP tells the NPU how many blocks of an operation may start before the operation
before it has finished; Vela's API derives it from whether the operation's input overlaps
the previous operation's output, taking each feature map's bytes to run from its first
element to its last. A feature map with a negative row or column stride (a mirrored band of
a MIRROR_PAD, ``mirror_bands``) runs backwards, so that span is empty and Vela finds no
overlap: a band read right after the band it reads was written would start before that
write had finished. Around the API call, an operation whose input overlaps such an output
(or whose own input runs backwards over the previous output) gets BLOCKDEP 0, the value that
waits for the whole previous operation; streams without negative strides are Vela's own.

Vela's BLOCKDEP walks the first blocks of the operation against the last blocks of the one
before, comparing their address ranges; a plan's stripes repeat the same pair of operations
(the same layers on the same buffers, a ring's slots coming round again) many times. The
value depends only on what ``calc_blockdep`` reads of the pair (:func:`blockdep_key`), so
within a stream generation (``stream_memo``) each distinct pair is worked out once.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

from tvm_ethos.backends.ethos_u.stream_base import fm_shape, kernel_key, shape3d, uses_lut, vela_api
from tvm_ethos.backends.ethos_u.stream_memo import remembered


def _span(fm) -> tuple[int, int, int]:
    """(region, lowest byte, highest byte + 1) any element of ``fm`` may occupy; a feature
    map without strides has the ones Vela's generator gives it (``get_strides``)."""
    # lazy: Vela loads with the first stream, as in _guarded_blockdep
    from ethosu.vela.register_command_stream_util import get_strides

    esize = fm.data_type.size_in_bytes()
    h, w, c = fm.shape.height, fm.shape.width, fm.shape.depth
    strides = get_strides(fm)
    reach = [(h - 1) * strides.height, (w - 1) * strides.width]
    depth = c * esize if fm.layout == vela_api().NpuLayout.NHWC \
        else (c - 1) // 16 * strides.depth + 16 * esize
    low = sum(min(0, r) for r in reach)
    high = sum(max(0, r) for r in reach) + depth
    used = fm.tiles.addresses[:1] + [a for a in fm.tiles.addresses[1:] if a]
    return fm.region, min(used) + low, max(used) + high


def _backwards(fm) -> bool:
    return fm is not None and fm.strides is not None and (fm.strides.height < 0
                                                          or fm.strides.width < 0)


def reads_backwards_output(prev_op, op) -> bool:
    """Whether ``op`` reads bytes ``prev_op`` may have written where either feature map runs
    backwards (the case Vela's BLOCKDEP misses)."""
    if prev_op is None or getattr(prev_op, "ofm", None) is None:
        return False
    inputs = [fm for fm in (op.ifm, getattr(op, "ifm2", None)) if fm is not None]
    if not (_backwards(prev_op.ofm) or any(_backwards(fm) for fm in inputs)):
        return False
    region, low, high = _span(prev_op.ofm)
    for fm in inputs:
        r, lo, hi = _span(fm)
        if r == region and lo < high and low < hi:
            return True
    return False


def _fm_key(fm) -> tuple | None:
    """What Vela's address ranges of ``fm`` depend on: region, element type, layout, shape,
    tiles and strides."""
    if fm is None:
        return None
    t, s = fm.tiles, fm.strides
    return (fm.region, fm.data_type, fm.layout, shape3d(fm.shape),
            (t.height_0, t.height_1, t.width_0, tuple(t.addresses)),
            None if s is None else (s.height, s.width, s.depth))


def blockdep_key(arch, prev_op, op) -> tuple:
    """Everything Vela's ``calc_blockdep(arch, prev_op, op)`` reads: the configuration, a
    LUT on either operation, the previous OFM and this operation's IFM and (unless a scalar)
    IFM2 with their addresses, both blocks, this operation's kind, OFM shape, padding and
    kernel."""
    if prev_op is None:
        return (arch.accelerator_config, None)
    ifm2 = op.ifm2 if op.ifm2 is not None and op.ifm2_scalar is None else None
    return (arch.accelerator_config, uses_lut(prev_op), uses_lut(op), _fm_key(prev_op.ofm),
            _fm_key(op.ifm), _fm_key(ifm2), shape3d(prev_op.block_config),
            shape3d(op.block_config), op.op_type, fm_shape(op.ofm),
            None if op.padding is None else tuple(op.padding), kernel_key(op.kernel))


@contextlib.contextmanager
def _guarded_blockdep() -> Iterator[None]:
    from ethosu.vela import register_command_stream_generator as generator

    vela_blockdep = generator.calc_blockdep

    def blockdep(arch, prev_op, npu_op) -> int:
        if reads_backwards_output(prev_op, npu_op):
            return 0
        return remembered("blockdep", lambda: blockdep_key(arch, prev_op, npu_op),
                          lambda: vela_blockdep(arch, prev_op, npu_op))

    generator.calc_blockdep = blockdep
    try:
        yield
    finally:
        generator.calc_blockdep = vela_blockdep


def register_command_stream(ops: list, accelerator) -> list[int]:
    """``npu_generate_register_command_stream(ops, accelerator)`` of Vela's API, each
    operation that reads what the operation before it wrote through a negative stride
    waiting for it (BLOCKDEP 0), each distinct pair's BLOCKDEP worked out once."""
    api = vela_api()
    with _guarded_blockdep():
        return api.npu_generate_register_command_stream(ops, accelerator)
