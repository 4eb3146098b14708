"""The per-accelerator facts the model needs: micro-block depths (the weight order), the
SHRAM LUT placement, and the MAC count used in statistics. Read from the accelerator registry
(``ethos_arch.accelerators``), whose facts are checked against Vela's architecture
description so they cannot drift from the compiler's."""
from __future__ import annotations

import functools
from dataclasses import dataclass

from ethos_arch.accelerators import ethos_u_core, names

#: The configurations the model runs: those whose streams Vela's API builds.
ACCELERATORS = names(lambda a: a.streams)


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
    core = ethos_u_core(name)
    return AcceleratorInfo(name, core.ifm_ublock[2], core.ofm_ublock[2], core.cores,
                           core.shram_bytes, core.shram_lut_address, core.LUT_SLOT_BYTES)
