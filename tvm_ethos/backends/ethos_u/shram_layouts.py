"""Vela's shared-buffer layout of an operation's block, worked out once per distinct question
in a stream generation.

Vela's register generator asks ``get_arch_block_config`` for every block operation (the
IFM buffer's end, the accumulators' start and format it writes), a search over the shared
buffer's banks; a plan's stripes and weight slices repeat a few operation shapes many times,
so most of those questions were asked already. The answer depends only on what the function
reads of the operation (:func:`layout_key`), so within a generation (``stream_memo``) each
distinct question goes to Vela once: :func:`remembered_layouts` around the generator call,
:func:`fitting_layout` for the block checks made while the operations are built. The
answer is Vela's own object, read and never changed, so the stream's words are the same.
"""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Hashable, Iterator

from tvm_ethos.backends.ethos_u.stream_base import fm_shape, kernel_key, shape3d, uses_lut
from tvm_ethos.backends.ethos_u.stream_memo import remembered


def _scaled(fm) -> bool:
    return fm.quantization is not None and fm.quantization.scale_f32 is not None


def layout_key(npu, traversal, arch) -> Hashable:
    """Everything ``get_arch_block_config(npu, traversal, arch)`` reads: the configuration,
    the operation's class and pooling kind, the traversal, the IFM upscaling, a LUT, whether
    every feature map has a scale, the IFM's element width, the IFM, IFM2 (unless a scalar)
    and OFM shapes, a scalar IFM2, the block and the kernel."""
    ifm2 = npu.ifm2 if npu.ifm2 is not None and npu.ifm2_scalar is None else None
    fms = [fm for fm in (npu.ifm, npu.ofm, npu.ifm2) if fm is not None]
    return (arch.accelerator_config, type(npu).__name__, getattr(npu, "sub_op_type", None),
            traversal, npu.ifm_upscale, uses_lut(npu), all(_scaled(fm) for fm in fms),
            npu.ifm.data_type.size_in_bits(), fm_shape(npu.ifm), fm_shape(ifm2),
            npu.ifm2_scalar is not None, fm_shape(npu.ofm), shape3d(npu.block_config),
            kernel_key(npu.kernel))


@functools.cache
def _vela():
    """Vela's register generator module and its own ``get_arch_block_config``, taken before
    :func:`remembered_layouts` first puts :func:`arch_block_config` in its place."""
    # lazy: Vela is the 'vela' extra, loaded with the first stream (stream_base.vela_api)
    from ethosu.vela import register_command_stream_generator as generator

    return generator, generator.get_arch_block_config


def fitting_layout(npu, traversal, arch):
    """Vela's ``get_arch_block_config(npu, traversal, arch)``, None where Vela refuses the
    operation's block (it does not fit the shared buffer); asked once per :func:`layout_key`
    in the generation under way (every time outside one)."""
    return remembered("shram layouts", lambda: layout_key(npu, traversal, arch),
                      lambda: _ask(npu, traversal, arch))


def _ask(npu, traversal, arch):
    try:
        return _vela()[1](npu, traversal, arch)
    except AssertionError:     # Vela's way of saying the block does not fit
        return None


def arch_block_config(npu, traversal, arch):
    """:func:`fitting_layout` in place of Vela's function: the layout, or Vela's
    AssertionError where the block does not fit."""
    layout = fitting_layout(npu, traversal, arch)
    if layout is None:
        raise AssertionError(f"block_config {npu.block_config} does not fit")
    return layout


@contextlib.contextmanager
def remembered_layouts() -> Iterator[None]:
    """Vela's register generator asking :func:`arch_block_config` instead of its own
    function while the block is open."""
    generator, _ = _vela()
    saved = generator.get_arch_block_config
    generator.get_arch_block_config = arch_block_config
    try:
        yield
    finally:
        generator.get_arch_block_config = saved
