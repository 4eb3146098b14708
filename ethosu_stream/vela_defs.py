"""Lazy access to the register definitions Vela ships, so importing this package never
requires the ``vela`` extra until a stream is actually decoded."""
from __future__ import annotations

import functools


@functools.lru_cache(maxsize=None)
def regs():
    """The ``ethos_u55_regs`` module (U55 and U65 share it)."""
    try:
        from ethosu.vela.ethos_u55_regs import ethos_u55_regs
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "ethosu_stream needs Vela's register definitions: install the 'vela' extra "
            "(pip install 'tvm-ethos[vela]', i.e. ethos-u-vela==5.2.0)") from exc
    return ethos_u55_regs


def mlw_codec():
    """Vela's weight codec (``ethosu.mlw_codec``)."""
    try:
        from ethosu import mlw_codec as codec
    except ImportError as exc:  # pragma: no cover
        raise ImportError(
            "ethosu_stream needs ethosu.mlw_codec to decode weights: install the 'vela' extra "
            "(ethos-u-vela==5.2.0)") from exc
    return codec
