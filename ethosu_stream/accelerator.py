"""The per-accelerator facts the model needs: micro-block depths (the weight order), the
SHRAM LUT placement, and the MAC count used in statistics. Read from Vela's architecture
description so they cannot drift from the compiler's."""
from __future__ import annotations

import contextlib
import functools
import io
from dataclasses import dataclass

ACCELERATORS = ("ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256",
                "ethos-u65-256", "ethos-u65-512")


@dataclass(frozen=True)
class AcceleratorInfo:
    name: str
    ifm_ublock_depth: int
    ofm_ublock_depth: int
    cores: int
    shram_bytes: int
    lut_address: int
    lut_slot_size: int


@functools.lru_cache(maxsize=None)
def accelerator_info(name: str) -> AcceleratorInfo:
    if name not in ACCELERATORS:
        raise ValueError(f"unknown accelerator {name!r}; use one of {', '.join(ACCELERATORS)} "
                         "(Ethos-U85 streams are not modelled)")
    try:
        from ethosu.vela.architecture_features import Accelerator, create_default_arch
    except ImportError as exc:  # pragma: no cover
        raise ImportError("ethosu_stream needs the 'vela' extra (ethos-u-vela==5.2.0)") from exc
    with contextlib.redirect_stdout(io.StringIO()):  # Vela warns about default configs
        arch = create_default_arch(Accelerator(name))
    return AcceleratorInfo(name, arch.ifm_ublock.depth, arch.ofm_ublock.depth, arch.ncores,
                           arch.shram_size_bytes, arch.shram_lut_address,
                           arch.shram_lut_slot_size)
