"""Deterministic mutations of TFLite flatbuffers for the malformed-model fuzzer.

A fuzz case is a pure function of ``(campaign seed, case index)``: :meth:`Corpus.case` picks a
seed model and a mutation with a ``random.Random`` seeded from both, so a worker that dies on
case ``i`` can be re-created by the parent from ``i`` alone, and any failure reproduces from the
two numbers printed with it.

Mutations aim at the parts of a flatbuffer that a reader interprets (offsets, vtables, vector
lengths, tensor shapes and types, quantization, operator indices, opcodes, options), found by
walking the seed once (:func:`layout`). Large constant payloads (weights) are excluded from
the random byte mutations: flipping a weight gives a valid model with other weights, which
tests nothing here and would send every such case through the (slow) full import.

Seeds: the shipped int8 models, the single-operator models of ``tests/tvm_ethos/tflite_builder``
and *defective* builder models (missing or invalid quantization parameters, shapes that
disagree with the data, absurd dimensions), rebuilt through the builder so that they are valid
flatbuffers whose content is wrong.
"""
from __future__ import annotations

import dataclasses
import random
import struct
import zlib
from collections import defaultdict
from pathlib import Path

import numpy as np

from tests.helpers.models import MODELS_DIR as MODELS

ROOT = Path(__file__).resolve().parents[2]

#: Shipped models used as seeds: name -> relative weight of the cases it seeds.
SHIPPED = {"ds_cnn_kws": 4, "resnet8_cifar": 3, "mobilenet_v1_0.25_96": 2}
#: The big one, only for the long local fuzz target.
SHIPPED_LONG = {"mobilenet_v1_1.0_224": 1}

# Payloads at most this long count as structure (shape / axes / paddings constants).
SMALL_CONST = 64

INTERESTING_I32 = (0, 1, -1, 2, -2, 3, 4, 7, 8, 16, 127, 128, 255, 256, 0x7FFF, 0x8000, 0xFFFF,
                   0x10000, 1 << 20, 1 << 24, 0x3FFFFFFF, 0x40000000, 0x7FFFFFFF, -0x80000000,
                   -0x7FFFFFFF, 0x12345678)
ABSURD_DIMS = (0, -1, -2, -7, 65535, 65536, 1 << 20, 1 << 24, 0x7FFFFFFF, -0x80000000,
               0x40000000, 46341, 1 << 16 | 1)
BAD_SCALES = (0.0, -0.0, -1.0, float("nan"), float("inf"), float("-inf"), 1e-45, 3e38, -1e-3)
INTERESTING_I64 = (-129, 128, 255, 256, 1 << 31, -(1 << 31) - 1, (1 << 63) - 1, -(1 << 63), 32768)


# --------------------------------------------------------------------------------------------
# the layout of a flatbuffer: where its interpretable fields are
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Layout:
    size: int
    structural: list[tuple[int, int]]            # [lo, hi) ranges outside large payloads
    sites: dict[str, list[tuple[int, int]]]      # kind -> [(position, width)]

    @property
    def structural_bytes(self) -> int:
        return sum(hi - lo for lo, hi in self.structural)

    def structural_pos(self, rng: random.Random) -> int:
        k = rng.randrange(self.structural_bytes)
        for lo, hi in self.structural:
            if k < hi - lo:
                return lo + k
            k -= hi - lo
        raise AssertionError("unreachable")


def layout(data: bytes) -> Layout:
    """Walk a valid TFLite flatbuffer and record the position of every field a reader uses."""
    import tflite

    sites: dict[str, list[tuple[int, int]]] = defaultdict(list)
    payloads: list[tuple[int, int]] = []

    def add(kind, pos, width):
        sites[kind].append((pos, width))

    def table(tab, kind):
        add("soffset", tab.Pos, 4)
        vt = tab.Pos - struct.unpack_from("<i", data, tab.Pos)[0]
        vlen = struct.unpack_from("<H", data, vt)[0]
        add("vtable_size", vt, 2)
        add("vtable_size", vt + 2, 2)
        for k in range(4, vlen, 2):
            add("vtable_entry", vt + k, 2)
            add(f"vtable_entry:{kind}:{k}", vt + k, 2)

    def scalar(tab, slot, kind, width):
        o = tab.Offset(slot)
        if o:
            add(kind, tab.Pos + o, width)

    def vector(tab, slot, kind, width):
        o = tab.Offset(slot)
        if not o:
            return 0, 0
        add("uoffset", tab.Pos + o, 4)
        start, n = tab.Vector(o), tab.VectorLen(o)
        add("veclen", start - 4, 4)
        add(f"veclen:{kind}", start - 4, 4)
        for k in range(n):
            add(kind, start + k * width, width)
        return start, n

    m = tflite.Model.GetRootAs(data, 0)
    add("root", 0, 4)
    table(m._tab, "model")
    scalar(m._tab, 4, "model_version", 4)
    vector(m._tab, 6, "uoffset", 4)
    for c in range(m.OperatorCodesLength()):
        oc = m.OperatorCodes(c)
        table(oc._tab, "opcode")
        scalar(oc._tab, 4, "deprecated_code", 1)
        scalar(oc._tab, 8, "opcode_version", 4)
        scalar(oc._tab, 10, "builtin_code", 4)
    for b in range(m.BuffersLength()):
        buf = m.Buffers(b)
        table(buf._tab, "buffer")
        o = buf._tab.Offset(4)
        if o:
            start, n = buf._tab.Vector(o), buf._tab.VectorLen(o)
            add("uoffset", buf._tab.Pos + o, 4)
            add("veclen", start - 4, 4)
            add("veclen:buffer", start - 4, 4)
            if n > SMALL_CONST:
                payloads.append((start, start + n))
            else:
                for k in range(0, n - 3, 4):
                    add("const_word", start + k, 4)
    for s in range(m.SubgraphsLength()):
        sg = m.Subgraphs(s)
        table(sg._tab, "subgraph")
        vector(sg._tab, 4, "uoffset", 4)
        vector(sg._tab, 6, "sg_io", 4)
        vector(sg._tab, 8, "sg_io", 4)
        vector(sg._tab, 10, "uoffset", 4)
        for t in range(sg.TensorsLength()):
            ten = sg.Tensors(t)
            table(ten._tab, "tensor")
            vector(ten._tab, 4, "shape", 4)
            scalar(ten._tab, 6, "tensor_type", 1)
            scalar(ten._tab, 8, "tensor_buffer", 4)
            scalar(ten._tab, 12, "quant_ref", 4)
            vector(ten._tab, 18, "shape_signature", 4)
            q = ten.Quantization()
            if q is not None:
                table(q._tab, "quant")
                vector(q._tab, 8, "scale", 4)
                vector(q._tab, 10, "zero_point", 8)
                scalar(q._tab, 16, "quant_dim", 4)
        for o in range(sg.OperatorsLength()):
            op = sg.Operators(o)
            table(op._tab, "operator")
            scalar(op._tab, 4, "opcode_index", 4)
            vector(op._tab, 6, "op_io", 4)
            vector(op._tab, 8, "op_io", 4)
            scalar(op._tab, 10, "options_type", 1)
            opts = op.BuiltinOptions()
            if opts is not None:
                table(opts, "options")
                vt = opts.Pos - struct.unpack_from("<i", data, opts.Pos)[0]
                vlen = struct.unpack_from("<H", data, vt)[0]
                for k in range(4, vlen, 2):
                    off = struct.unpack_from("<H", data, vt + k)[0]
                    if off:
                        add("options_field", opts.Pos + off, 1)
    structural, pos = [], 0
    for lo, hi in sorted(payloads):
        if lo > pos:
            structural.append((pos, lo))
        pos = max(pos, hi)
    if pos < len(data):
        structural.append((pos, len(data)))
    return Layout(len(data), structural, dict(sites))


# --------------------------------------------------------------------------------------------
# mutation operators: each edits ``d`` (a bytearray) in place or returns new bytes
# --------------------------------------------------------------------------------------------
def _put(d: bytearray, pos: int, width: int, value) -> None:
    if pos < 0 or pos + width > len(d):
        return
    fmt = {1: "<b", 2: "<h", 4: "<i", 8: "<q"}[width]
    lim = 1 << (8 * width - 1)
    value = ((int(value) + lim) % (2 * lim)) - lim
    struct.pack_into(fmt, d, pos, value)


def _site(rng, L: Layout, *kinds):
    pool = [s for k in kinds for s in L.sites.get(k, ())]
    return rng.choice(pool) if pool else None


def m_truncate(rng, d, L):
    if rng.random() < 0.5:
        cut = rng.randrange(len(d))
    else:
        cut = L.structural_pos(rng)
    return bytes(d[:cut]), f"truncate at {cut} of {len(d)}"


def m_bitflip(rng, d, L):
    n = rng.choice((1, 1, 2, 3, 8))
    where = []
    for _ in range(n):
        p = L.structural_pos(rng)
        bit = rng.randrange(8)
        d[p] ^= 1 << bit
        where.append(f"{p}.{bit}")
    return d, f"flip bits {','.join(where)}"


def m_bytes(rng, d, L):
    n = rng.choice((1, 1, 2, 4))
    where = []
    for _ in range(n):
        p = L.structural_pos(rng)
        v = rng.choice((0, 0xFF, 0x7F, 0x80, 0x01, rng.randrange(256)))
        d[p] = v
        where.append(f"{p}={v:#x}")
    return d, f"set bytes {','.join(where)}"


def m_span(rng, d, L):
    p = L.structural_pos(rng)
    n = min(rng.choice((2, 4, 8, 16, 64, 256)), len(d) - p)
    kind = rng.choice(("zero", "ff", "random", "copy"))
    if kind == "zero":
        d[p:p + n] = bytes(n)
    elif kind == "ff":
        d[p:p + n] = b"\xff" * n
    elif kind == "random":
        d[p:p + n] = bytes(rng.randrange(256) for _ in range(n))
    else:
        src = rng.randrange(max(1, len(d) - n))
        d[p:p + n] = d[src:src + n]
    return d, f"overwrite {n} bytes at {p} ({kind})"


def m_word(rng, d, L):
    s = _site(rng, L, "uoffset", "veclen", "soffset", "root", "tensor_buffer", "opcode_index",
              "quant_ref")
    if s is None:
        return m_bytes(rng, d, L)
    v = rng.choice(INTERESTING_I32 + (len(d), len(d) - 4, len(d) + 4, rng.randrange(len(d))))
    _put(d, s[0], 4, v)
    return d, f"word at {s[0]} = {v}"


def m_shape(rng, d, L):
    s = _site(rng, L, "shape")
    if s is None:
        return m_word(rng, d, L)
    if rng.random() < 0.7:
        v = rng.choice(ABSURD_DIMS)
    else:
        old = struct.unpack_from("<i", d, s[0])[0]
        v = rng.choice((old + 1, old - 1, old * 2, old * 3, 1, 3))
    _put(d, s[0], 4, v)
    return d, f"shape element at {s[0]} = {v}"


def m_rank(rng, d, L):
    s = _site(rng, L, "veclen:shape", "veclen:shape_signature")
    if s is None:
        return m_word(rng, d, L)
    old = struct.unpack_from("<I", d, s[0])[0]
    v = rng.choice((0, max(old - 1, 0), old + 1, old + 4, 0x10000, 0x7FFFFFFF))
    _put(d, s[0], 4, v)
    return d, f"shape length at {s[0]} = {v} (was {old})"


def m_type(rng, d, L):
    s = _site(rng, L, "tensor_type")
    if s is None:
        return m_bytes(rng, d, L)
    v = rng.choice((0, 1, 2, 3, 4, 5, 6, 7, 10, 17, 18, 19, 20, 42, 127, -1))
    _put(d, s[0], 1, v)
    return d, f"tensor type at {s[0]} = {v}"


def m_quant(rng, d, L):
    """Missing or invalid quantization parameters."""
    what = rng.choice(("drop", "drop", "scale", "scale", "zero_point", "dim", "scale_len",
                       "zp_len"))
    if what == "drop":
        s = _site(rng, L, "vtable_entry:tensor:12")
        if s is not None:
            _put(d, s[0], 2, 0)
            return d, f"drop quantization (vtable entry at {s[0]})"
        what = "scale"
    if what == "scale":
        s = _site(rng, L, "scale")
        if s is not None:
            v = rng.choice(BAD_SCALES)
            struct.pack_into("<f", d, s[0], v)
            return d, f"scale at {s[0]} = {v}"
    if what == "zero_point":
        s = _site(rng, L, "zero_point")
        if s is not None:
            v = rng.choice(INTERESTING_I64)
            _put(d, s[0], 8, v)
            return d, f"zero point at {s[0]} = {v}"
    if what == "dim":
        s = _site(rng, L, "quant_dim")
        if s is not None:
            v = rng.choice((1, 2, 3, 4, 5, -1, 1 << 20))
            _put(d, s[0], 4, v)
            return d, f"quantized dimension at {s[0]} = {v}"
    s = _site(rng, L, "veclen:scale" if what == "scale_len" else "veclen:zero_point")
    if s is not None:
        old = struct.unpack_from("<I", d, s[0])[0]
        v = rng.choice((0, old + 1, max(old - 1, 0), 3, 0x7FFFFFFF))
        _put(d, s[0], 4, v)
        return d, f"{what} at {s[0]} = {v} (was {old})"
    return m_bytes(rng, d, L)


def m_index(rng, d, L):
    s = _site(rng, L, "op_io", "sg_io", "tensor_buffer", "opcode_index")
    if s is None:
        return m_word(rng, d, L)
    v = rng.choice((-1, -2, 0, 1, 2, 3, 5, 100, 0x7FFF, 0x7FFFFFFF, -0x80000000))
    _put(d, s[0], 4, v)
    return d, f"index at {s[0]} = {v}"


def m_opcode(rng, d, L):
    s = _site(rng, L, "builtin_code", "deprecated_code", "opcode_version")
    if s is None:
        return m_bytes(rng, d, L)
    v = rng.choice((0, 1, 2, 3, 4, 9, 17, 22, 32, 40, 49, 83, 127, 128, 150, 200, 255, 1000, -1))
    _put(d, s[0], s[1], v)
    return d, f"opcode field at {s[0]} = {v}"


def m_vtable(rng, d, L):
    s = _site(rng, L, "vtable_entry", "vtable_size")
    if s is None:
        return m_bytes(rng, d, L)
    v = rng.choice((0, 1, 2, 3, 4, 6, 8, 0x7FFF, 0xFFFF, rng.randrange(0x10000)))
    struct.pack_into("<H", d, s[0], v)
    return d, f"vtable entry at {s[0]} = {v}"


def m_options(rng, d, L):
    if rng.random() < 0.25:
        s = _site(rng, L, "options_type")
        if s is not None:
            v = rng.choice((0, 1, 2, 5, 9, 13, 27, 127, -1))
            _put(d, s[0], 1, v)
            return d, f"options type at {s[0]} = {v}"
    s = _site(rng, L, "options_field")
    if s is None:
        return m_bytes(rng, d, L)
    pos = s[0]
    if pos % 4 == 0 and rng.random() < 0.5:
        v = rng.choice((0, -1, 2, 5, 100, 0x7FFFFFFF, -0x80000000))
        _put(d, pos, 4, v)
    else:
        v = rng.choice((0, 1, 2, 3, 5, 6, 7, 100, -1, -128))
        _put(d, pos, 1, v)
    return d, f"options field at {pos} = {v}"


def m_const(rng, d, L):
    s = _site(rng, L, "const_word")
    if s is None:
        return m_shape(rng, d, L)
    v = rng.choice(ABSURD_DIMS + (-3, 5, 4))
    _put(d, s[0], 4, v)
    return d, f"small constant at {s[0]} = {v}"


def m_splice(rng, d, L):
    p = L.structural_pos(rng)
    n = rng.choice((1, 2, 4, 8, 64))
    if rng.random() < 0.5:
        return bytes(d[:p] + d[p + n:]), f"delete {n} bytes at {p}"
    return bytes(d[:p] + bytes(rng.randrange(256) for _ in range(n)) + d[p:]), \
        f"insert {n} bytes at {p}"


MUTATORS = {
    "truncate": (m_truncate, 6), "bitflip": (m_bitflip, 8), "bytes": (m_bytes, 5),
    "span": (m_span, 4), "word": (m_word, 6), "shape": (m_shape, 6), "rank": (m_rank, 3),
    "type": (m_type, 3), "quant": (m_quant, 6), "index": (m_index, 5), "opcode": (m_opcode, 3),
    "vtable": (m_vtable, 4), "options": (m_options, 4), "const": (m_const, 2),
    "splice": (m_splice, 3),
}


def mutate(rng: random.Random, data: bytes, L: Layout, stack: int = 1) -> tuple[bytes, str]:
    """Apply ``stack`` weighted-random mutations; returns (bytes, description)."""
    names = list(MUTATORS)
    weights = [MUTATORS[n][1] for n in names]
    d: bytes | bytearray = bytearray(data)
    what = []
    for _ in range(stack):
        name = rng.choices(names, weights)[0]
        if not isinstance(d, bytearray):
            d = bytearray(d)
        if len(d) == 0:
            break
        if len(d) != L.size and name not in ("truncate", "bitflip", "bytes", "span"):
            name = "bitflip"          # positions are stale after a splice or a cut
        if L.structural_bytes == 0 or (len(d) != L.size and len(d) < 8):
            break
        d, desc = MUTATORS[name][0](rng, d, L if len(d) == L.size else _clip(L, len(d)))
        what.append(f"{name}: {desc}")
    return bytes(d), "; ".join(what) or "none"


def _clip(L: Layout, n: int) -> Layout:
    st = [(lo, min(hi, n)) for lo, hi in L.structural if lo < n]
    return Layout(n, st or [(0, n)], {})


# --------------------------------------------------------------------------------------------
# defective models through the builder
# --------------------------------------------------------------------------------------------
def _builder():
    import sys
    p = str(ROOT / "tests" / "tvm_ethos")
    if p not in sys.path:
        sys.path.insert(0, p)
    import tflite_builder
    return tflite_builder


def _captured(fn, *args, **kw):
    """Run a tflite_builder model function and capture the arguments it passes to build()."""
    tb = _builder()
    seen = {}
    orig = tb.build

    def spy(tensors, *a, **k):
        seen["call"] = (tensors, a, k)
        return orig(tensors, *a, **k)

    tb.build = spy
    try:
        data = fn(*args, **kw)
    finally:
        tb.build = orig
    return data, seen["call"]


def builder_models(seed: int = 0) -> list[tuple[str, bytes]]:
    """Valid single-operator models (the builder's), then defective variants of each."""
    tb = _builder()
    rs = np.random.RandomState(seed)
    makers = {
        "conv2d": lambda: tb.conv2d(rs),
        "conv2d_s2_dil": lambda: tb.conv2d(rs, in_shape=(1, 9, 9, 3), stride=(2, 2),
                                           padding="VALID", act="relu6"),
        "depthwise": lambda: tb.conv2d(rs, depthwise=True, multiplier=2),
        "fully_connected": lambda: tb.fully_connected(rs),
        "avg_pool": lambda: tb.pool(rs),
        "max_pool_same": lambda: tb.pool(rs, kind="max", padding="SAME"),
        "add": lambda: tb.binary(rs),
        "mul_broadcast": lambda: tb.binary(rs, kind="mul", b_shape=(1, 1, 1, 8)),
        "mean": lambda: tb.mean(rs),
        "softmax": lambda: tb.softmax(rs),
    }
    out = []
    for name, make in makers.items():
        data, (tensors, a, k) = _captured(make)
        out.append((name, data))
        out.extend((f"{name}/{v}", d) for v, d in _defects(tb, tensors, a, k))
    return out


def _defects(tb, tensors, a, k):
    """Rebuild ``tensors`` with one defect each: a valid flatbuffer with wrong content."""
    def rebuild(i, **changes):
        ts = [_copy_t(tb, t) for t in tensors]
        for key, v in changes.items():
            setattr(ts[i], key, v)
        return tb.build(ts, *a, **k)

    for i, t in enumerate(tensors):
        if t.scale is not None:
            yield f"t{i}:no_quantization", rebuild(i, scale=None, zp=None)
            yield f"t{i}:scale_zero", rebuild(i, scale=np.zeros_like(t.scale))
            yield f"t{i}:scale_nan", rebuild(i, scale=np.full_like(t.scale, np.nan))
            yield f"t{i}:scale_negative", rebuild(i, scale=-t.scale)
            yield f"t{i}:zp_out_of_range", rebuild(i, zp=np.full_like(t.zp, 1000))
            yield f"t{i}:zp_count", rebuild(i, zp=np.zeros(t.zp.size + 2, np.int64))
            if t.scale.size > 1:
                yield f"t{i}:scale_count", rebuild(i, scale=t.scale[:-1], zp=t.zp[:-1])
            yield f"t{i}:quant_axis", rebuild(i, axis=len(t.shape) + 2)
        if t.shape:
            big = list(t.shape)
            big[-1] = 1 << 30
            yield f"t{i}:absurd_dim", rebuild(i, shape=big)
            yield f"t{i}:zero_dim", rebuild(i, shape=[0] + list(t.shape[1:]))
            yield f"t{i}:negative_dim", rebuild(i, shape=[-1] + list(t.shape[1:]))
            wrong = list(t.shape)
            wrong[-1] += 1
            yield f"t{i}:wrong_shape", rebuild(i, shape=wrong)
            yield f"t{i}:rank_plus_one", rebuild(i, shape=list(t.shape) + [1])
            if len(t.shape) > 1:
                yield f"t{i}:rank_minus_one", rebuild(i, shape=list(t.shape[1:]))
        yield f"t{i}:scalar_shape", rebuild(i, shape=[])
        if t.data is not None:
            flat = np.asarray(t.data).reshape(-1)
            yield f"t{i}:short_data", rebuild(i, data=flat[: max(flat.size // 2, 1)])
        if t.dtype == "int8" and t.data is None:
            yield f"t{i}:float32", rebuild(i, dtype="float32")


def _copy_t(tb, t):
    c = tb.T.__new__(tb.T)
    c.__dict__.update(t.__dict__)
    c.shape = list(t.shape)
    return c


# --------------------------------------------------------------------------------------------
# the corpus and the case generator
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Seed:
    name: str
    data: bytes
    layout: Layout | None       # None: not a valid flatbuffer to walk (a defective seed)
    weight: float


class Corpus:
    def __init__(self, seeds: list[Seed]):
        self.seeds = seeds
        self.weights = [s.weight for s in seeds]

    @classmethod
    def default(cls, long: bool = False) -> "Corpus":
        seeds = []
        shipped = dict(SHIPPED, **(SHIPPED_LONG if long else {}))
        for name, w in shipped.items():
            p = MODELS / f"{name}.tflite"
            if p.exists():
                data = p.read_bytes()
                seeds.append(Seed(name, data, layout(data), float(w)))
        built = builder_models()
        valid = [(n, d) for n, d in built if "/" not in n]
        broken = [(n, d) for n, d in built if "/" in n]
        for n, d in valid:
            seeds.append(Seed(n, d, layout(d), 3.0 / len(valid) * 3))
        for n, d in broken:
            try:
                L = layout(d)
            except Exception:
                L = None
            seeds.append(Seed(n, d, L, 3.0 / len(broken)))
        return cls(seeds)

    def case(self, campaign: int, index: int) -> tuple[bytes, str]:
        """The bytes of case ``index`` of campaign ``campaign`` and what was done to them."""
        rng = random.Random(zlib.crc32(struct.pack("<qq", campaign, index)) ^ (campaign << 32))
        seed = rng.choices(self.seeds, self.weights)[0]
        if seed.layout is None or ("/" in seed.name and rng.random() < 0.3):
            return seed.data, f"{seed.name}: unmutated"
        stack = rng.choice((1, 1, 1, 1, 2, 3))
        data, desc = mutate(rng, seed.data, seed.layout, stack)
        return data, f"{seed.name}: {desc}"


__all__ = ["Corpus", "Layout", "MUTATORS", "Seed", "builder_models", "layout", "mutate"]
