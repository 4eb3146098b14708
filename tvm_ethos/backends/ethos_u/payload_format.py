"""An Ethos-U payload in the executor's program: its JSON form (``program.json``'s
``payloads``: the byte fields base64, the arena tensors as ``[name, shape, dtype, offset]``)
and its run on the functional model, registered with the runtime as one
:class:`~tvm_ethos.runtime.payloads.PayloadFormat`."""
from __future__ import annotations

import base64
import dataclasses
from collections.abc import Sequence

import numpy as np

from tvm_ethos.backends.ethos_u.payload import ArenaTensor, EthosUPayload
from tvm_ethos.backends.ethos_u.stream_run import run_payload
from tvm_ethos.runtime.payloads import PayloadFormat
from tvm_ethos.schema import MAX_TENSOR_BYTES, Node, check_tensor_size

_PAYLOAD_BYTES = ("driver_payload", "flash")


def _payload_json(p: EthosUPayload) -> dict:
    d = dataclasses.asdict(p)
    for k in _PAYLOAD_BYTES:
        d[k] = base64.b64encode(d[k]).decode()
    for k in ("inputs", "outputs"):
        d[k] = [[a["name"], list(a["shape"]), a["dtype"], a["offset"]] for a in d[k]]
    return d


_PAYLOAD_FIELDS = ("accelerator", "driver_payload", "flash", "scratch_bytes",
                   "fast_scratch_bytes", "inputs", "outputs", "work_bytes", "schedule",
                   "untouched_top_bytes", "weight_dma_bytes", "weights_left_in_flash",
                   "block_configs")


def _payload_from_json(node: Node) -> EthosUPayload:
    node.obj(_PAYLOAD_FIELDS)
    d: dict = {"accelerator": node.get("accelerator").str(nonempty=True)}
    for k in _PAYLOAD_BYTES:
        d[k] = _base64(node.get(k))
    for k in ("scratch_bytes", "fast_scratch_bytes"):
        d[k] = node.get(k).int(0, MAX_TENSOR_BYTES)
    for k in ("work_bytes", "untouched_top_bytes", "weight_dma_bytes", "weights_left_in_flash"):
        if node.opt(k) is not None:
            d[k] = node.get(k).int(0, MAX_TENSOR_BYTES)
    if node.opt("schedule") is not None:
        d["schedule"] = node.get("schedule").str()
    for k in ("inputs", "outputs"):
        arena = []
        for a in node.get(k).items():
            name_n, shape_n, dtype_n, off_n = a.items(length=4)
            shape, dtype, off = shape_n.shape(), dtype_n.dtype(), off_n.int()
            if off + check_tensor_size(shape, dtype, a.where) > d["scratch_bytes"]:
                raise a.error(f"lies outside the {d['scratch_bytes']} B scratch arena")
            arena.append(ArenaTensor(name_n.str(), shape, dtype, off))
        d[k] = tuple(arena)
    if node.opt("block_configs") is not None:
        d["block_configs"] = tuple((why.str(), n.int()) for why, n in
                                   (b.items(length=2) for b in node.get("block_configs").items()))
    return EthosUPayload(**d)


def _base64(node: Node) -> bytes:
    try:
        return base64.b64decode(node.str(), validate=True)
    except ValueError as err:   # binascii.Error, or a character outside ASCII
        raise node.error(f"base64 data, not decodable ({err})") from None


def _run(payload: EthosUPayload, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    outs, _stats = run_payload(payload, list(inputs))
    return outs


ETHOS_U_PAYLOAD_FORMAT = PayloadFormat("ethos-u", EthosUPayload, _PAYLOAD_FIELDS, _payload_json,
                                       _payload_from_json, _run)
