"""The runtime's payload interface (tvm_ethos/runtime/payloads.py): a backend registers how its
device payloads are saved, read and run."""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tvm_ethos.backends.ethos_u.payload import ArenaTensor, EthosUPayload
from tvm_ethos.backends.ethos_u.payload_format import ETHOS_U_PAYLOAD_FORMAT
from tvm_ethos.errors import TvmEthosError
from tvm_ethos.runtime import payloads
from tvm_ethos.runtime.payloads import (
    PayloadFormat,
    format_of,
    payload_from_json,
    payload_to_json,
    register_payload_format,
)
from tvm_ethos.schema import Node, SchemaError

_TENSORS = st.lists(st.tuples(st.text("abc_0", min_size=1, max_size=6),
                              st.lists(st.integers(1, 4), min_size=1, max_size=4),
                              st.sampled_from(("int8", "uint8", "int16"))),
                    max_size=3)


@st.composite
def _payloads(draw) -> EthosUPayload:
    def arena(specs):
        out, off = [], 0
        for name, shape, dtype in specs:
            out.append(ArenaTensor(name, tuple(shape), dtype, off))
            off += int(np.prod(shape)) * np.dtype(dtype).itemsize
        return tuple(out), off

    ins, n_in = arena(draw(_TENSORS))
    outs, n_out = arena(draw(_TENSORS))
    outs = tuple(ArenaTensor(t.name, t.shape, t.dtype, t.offset + n_in) for t in outs)
    return EthosUPayload(
        accelerator=draw(st.sampled_from(("ethos-u55-128", "ethos-u65-256"))),
        driver_payload=draw(st.binary(max_size=64)), flash=draw(st.binary(max_size=64)),
        scratch_bytes=n_in + n_out + draw(st.integers(0, 64)),
        fast_scratch_bytes=draw(st.integers(0, 1 << 20)), inputs=ins, outputs=outs,
        work_bytes=draw(st.integers(0, 99)), schedule=draw(st.sampled_from(("plan",
                                                                             "layer by layer"))),
        untouched_top_bytes=draw(st.integers(0, 99)),
        weight_dma_bytes=draw(st.integers(0, 99)), weights_left_in_flash=draw(st.integers(0, 9)),
        block_configs=tuple(draw(st.lists(st.tuples(st.sampled_from(("planned", "vela")),
                                                    st.integers(0, 9)), max_size=2))))


@settings(max_examples=40, deadline=None)
@given(_payloads())
def test_an_ethos_u_payload_round_trips_through_its_registered_format(payload):
    assert format_of(payload) is ETHOS_U_PAYLOAD_FORMAT
    text = json.dumps(payload_to_json(payload), sort_keys=True)
    assert payload_from_json(Node(json.loads(text), "payload")) == payload


@dataclass(frozen=True)
class _Other:
    scale: int


_OTHER = PayloadFormat("other", _Other, ("scale",), lambda p: {"scale": p.scale},
                       lambda n: _Other(n.obj(("scale",)).get("scale").int()),
                       lambda p, ins: [np.asarray(x) * p.scale for x in ins])


def test_the_reader_takes_the_format_whose_fields_cover_the_keys(monkeypatch):
    monkeypatch.setattr(payloads, "_FORMATS", list(payloads._FORMATS))
    register_payload_format(_OTHER)
    register_payload_format(_OTHER)   # once per name
    assert [f.name for f in payloads._FORMATS].count("other") == 1
    assert payload_from_json(Node({"scale": 3}, "p")) == _Other(3)
    assert [x.tolist() for x in payloads.run_payload(_Other(3), [np.arange(3)])] == [[0, 3, 6]]
    with pytest.raises(SchemaError, match=r"p: a device payload no registered backend reads "
                                          r"\(formats registered: ethos-u, other\)"):
        payload_from_json(Node({"scale": 3, "colour": 1}, "p"))


def test_a_payload_of_no_registered_format_names_the_fix():
    with pytest.raises(TvmEthosError, match="no payload format is registered for _Other; .*"
                                            "register_payload_format"):
        payload_to_json(_Other(1))
