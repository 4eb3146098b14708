"""What every part of the Ethos-U stream generator shares: Vela's Python API behind one door
(the ``vela`` extra, imported lazily, so tvm-ethos imports without it), the memory regions a
stream addresses, the read-only constant store, and the error that sends a subgraph back to
the "tir" emulator."""

from __future__ import annotations

from ethos_arch.accelerators import Family, ethos_u_core, names
from ethos_arch.accelerators import accelerator as accelerator_of
from tvm_ethos.errors import CompileError

FLASH_REGION, SCRATCH_REGION, FAST_SCRATCH_REGION = 0, 1, 2
#: constants in flash start on 16 bytes, and their streams are whole 16-byte bursts
ALIGN = 16
#: The configurations Vela's API streams (the accelerator registry's ``streams``).
STREAM_ACCELERATORS = names(lambda a: a.streams)


class UnsupportedOperatorError(CompileError):
    """The stream generator has no NPU operation for this operator: the subgraph keeps the
    "tir" emulator. ``kind`` names the operator."""

    def __init__(self, kind: str, why: str):
        super().__init__(f"the Ethos-U stream generator cannot express {kind}: {why}")
        self.kind = kind


def vela_api():
    """``ethosu.vela.api``, or a CompileError saying how to install it."""
    try:
        from ethosu.vela import api
    except ImportError:
        raise CompileError(
            "generating Ethos-U command streams needs Vela: "
            "pip install 'tvm-ethos[vela]' (ethos-u-vela)"
        ) from None
    return api


def shape3d(shape) -> tuple[int, int, int] | None:
    """An ``NpuShape3D`` (a shape or block) as a key: (height, width, depth), or None."""
    return None if shape is None else (shape.height, shape.width, shape.depth)


def fm_shape(fm) -> tuple[int, int, int] | None:
    """A feature map's shape as a key, or None where there is no feature map."""
    return None if fm is None else shape3d(fm.shape)


def kernel_key(k) -> tuple[int, ...] | None:
    """An ``NpuKernel`` as a key: size, strides and dilation, or None."""
    return None if k is None else (k.width, k.height, k.stride_x, k.stride_y, k.dilation_x,
                                   k.dilation_y)


def uses_lut(npu) -> bool:
    """Whether an operation's activation is a table lookup (it uses the shared buffer's LUT
    banks)."""
    act = npu.activation
    return act is not None and act.op_type == vela_api().NpuActivationOp.TABLE_LOOKUP


def npu_accelerator(accelerator: str):
    if accelerator not in STREAM_ACCELERATORS:
        raise UnsupportedOperatorError(
            accelerator,
            "Vela's Python API has no Ethos-U85 (or this configuration); "
            f"streams are generated for {', '.join(STREAM_ACCELERATORS)}",
        )
    return getattr(vela_api().NpuAccelerator, accelerator_of(accelerator).vela_name)


def sram_region(accelerator: str) -> int:
    """The region a plan's SRAM is in. An Ethos-U65 system (Vela's default memory mode,
    Dedicated_Sram) keeps the arena (region 1, where TFLite Micro puts the network's inputs
    and outputs) in DRAM and gives the NPU its SRAM as the fast scratch (region 2, the
    driver's fast memory); an Ethos-U55 (Shared_Sram) has the arena itself in SRAM."""
    family = accelerator_of(accelerator).family
    return FAST_SCRATCH_REGION if family is Family.ETHOS_U65 else SCRATCH_REGION


def lut_address(accelerator: str) -> int:
    """Where LUTs go in SHRAM (the last two banks; Vela's ``shram_lut_address``)."""
    return ethos_u_core(accelerator).shram_lut_address


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


class Flash:
    """The read-only constants, each 16-byte aligned, in the order they are added."""

    def __init__(self):
        self.data = bytearray()

    def add(self, raw: bytes):
        """The range of ``raw``, zero padded: the NPU's stream lengths are whole bursts."""
        off = len(self.data)
        self.data += bytes(raw)
        self.data += bytes(_align(len(self.data)) - len(self.data))
        return vela_api().NpuAddressRange(FLASH_REGION, off, len(self.data) - off)
