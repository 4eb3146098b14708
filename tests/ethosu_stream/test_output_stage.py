"""The output stage's rules (rfcs/0007, "The functional model's rules"), each on single
operations that Vela's register generator writes, against Python integers: a 32-bit OFM
takes no zero point, a LUT on a 32-bit OFM is indexed with it; and the register uses the
model does not implement end in a StreamError naming the command."""
import numpy as np
import pytest
from ethosu.vela import api
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ethosu_stream import Memory, StreamError, decode_stream, run_stream
from ethosu_stream.accelerator import accelerator_info
from ethosu_stream.memory import SHRAM_REGION

from .streams import c1

ACC = api.NpuAccelerator.Ethos_U55_128
ACC_NAME = "ethos-u55-128"
FLASH, SCRATCH = 0, 1
IFM2_BASE, OFM_BASE = 4096, 8192
INT32 = (-(1 << 31), (1 << 31) - 1)


def _fm(shape, dtype, address, zp=0, scale=None):
    fm = api.NpuFeatureMap()
    fm.data_type = dtype
    fm.shape = api.NpuShape3D(*shape)
    fm.layout = api.NpuLayout.NHWC
    fm.region = SCRATCH
    fm.quantization = api.NpuQuantization(scale_f32=scale, zero_point=zp)
    fm.tiles = api.NpuTileBox(shape[0], 0, shape[1], [address, 0, 0, 0])
    return fm


def _words(ops):
    for op in ops:
        op.block_config = api.npu_find_block_configs(op, ACC)[0]
    return api.npu_generate_register_command_stream(ops, ACC)


def _memory(a: np.ndarray, b: np.ndarray | None = None, lut: bytes = b"") -> Memory:
    scratch = np.zeros(OFM_BASE * 2, np.uint8)
    raw = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    scratch[:raw.size] = raw
    if b is not None:
        raw = np.ascontiguousarray(b).reshape(-1).view(np.uint8)
        scratch[IFM2_BASE:IFM2_BASE + raw.size] = raw
    shram = np.zeros(accelerator_info(ACC_NAME).shram_bytes, np.uint8)
    base = accelerator_info(ACC_NAME).lut_address
    shram[base:base + len(lut)] = np.frombuffer(lut, np.uint8)
    return Memory({FLASH: 16, SCRATCH: scratch, SHRAM_REGION: shram})


def _ofm(mem: Memory, n: int, dtype) -> np.ndarray:
    size = n * np.dtype(dtype).itemsize
    return mem.regions[SCRATCH][OFM_BASE:OFM_BASE + size].view(dtype).astype(np.int64)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(*INT32), min_size=1, max_size=24), st.integers(0, 31),
       st.integers(-128, 127))
def test_a_32bit_shift_right_takes_no_ofm_zero_point(values, shift, zp):
    """SHR (rounding half up) from and into int32 with an OFM zero point, as Vela 3.11/4.5
    write their softmax's ``>> 12``: the zero point is not added."""
    a = np.array(values, np.int32).reshape(1, 1, -1)
    n = a.size
    op = api.NpuElementWiseOperation(api.NpuElementWiseOp.SHR)
    op.ifm = _fm((1, 1, n), api.NpuDataType.INT32, 0)
    op.ifm2 = _fm((1, 1, 1), api.NpuDataType.INT32, IFM2_BASE)
    op.ifm2_scalar = shift
    op.ofm = _fm((1, 1, n), api.NpuDataType.INT32, OFM_BASE, zp=zp)
    op.rounding_mode = api.NpuRoundingMode.NATURAL
    words = _words([op])
    assert any(c.name == "NPU_SET_OFM_ZERO_POINT" and c.param == zp & 0xFFFF
               for c in decode_stream(words))
    mem = _memory(a)
    run_stream(words, mem, ACC_NAME)
    want = [(v + (1 << shift - 1)) >> shift if shift else v for v in values]
    assert _ofm(mem, n, np.int32).tolist() == want


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(*INT32), st.integers(*INT32)), min_size=1, max_size=24),
       st.integers(-128, 127), st.sampled_from(["ADD", "SUB"]))
def test_32bit_add_and_sub_saturate_and_take_no_ofm_zero_point(pairs, zp, kind):
    a = np.array([p[0] for p in pairs], np.int32).reshape(1, 1, -1)
    b = np.array([p[1] for p in pairs], np.int32).reshape(1, 1, -1)
    n = a.size
    op = api.NpuElementWiseOperation(getattr(api.NpuElementWiseOp, kind))
    op.ifm = _fm((1, 1, n), api.NpuDataType.INT32, 0)
    op.ifm2 = _fm((1, 1, n), api.NpuDataType.INT32, IFM2_BASE)
    op.ofm = _fm((1, 1, n), api.NpuDataType.INT32, OFM_BASE, zp=zp)
    mem = _memory(a, b)
    run_stream(_words([op]), mem, ACC_NAME)
    want = [min(max(x + y if kind == "ADD" else x - y, INT32[0]), INT32[1]) for x, y in pairs]
    assert _ofm(mem, n, np.int32).tolist() == want


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(-128, 127), st.integers(-128, 127)), min_size=1,
                max_size=24),
       st.integers(-128, 127), st.integers(0, 2**31 - 1))
def test_a_lut_on_a_32bit_ofm_is_indexed_with_the_zero_point(pairs, zp, seed):
    """SUB into int32 through a 256-entry int32 table (Vela's softmax exponentials): the
    index is the difference plus the OFM zero point, clamped to int8, plus 128."""
    a = np.array([p[0] for p in pairs], np.int8).reshape(1, 1, -1)
    b = np.array([p[1] for p in pairs], np.int8).reshape(1, 1, -1)
    n = a.size
    table = np.random.RandomState(seed).randint(*INT32, 256, dtype=np.int64).astype("<i4")
    op = api.NpuElementWiseOperation(api.NpuElementWiseOp.SUB)
    op.ifm = _fm((1, 1, n), api.NpuDataType.INT8, 0)
    op.ifm2 = _fm((1, 1, n), api.NpuDataType.INT8, IFM2_BASE)
    op.ofm = _fm((1, 1, n), api.NpuDataType.INT32, OFM_BASE, zp=zp)
    act = api.NpuActivation(api.NpuActivationOp.TABLE_LOOKUP)
    act.lookup_table_index = 0
    op.activation = act
    words = _words([op])
    assert any(c.name == "NPU_SET_ACTIVATION" and c.param >> 12 == 3
               for c in decode_stream(words))  # Vela forces the int8 clip range
    mem = _memory(a, b, table.tobytes())
    run_stream(words, mem, ACC_NAME)
    want = [int(table[min(max(x - y + zp, -128), 127) + 128]) for x, y in pairs]
    assert _ofm(mem, n, np.int32).tolist() == want



@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["int8", "uint8"]), st.integers(0, 255), st.integers(0, 255),
       st.integers(0, 2**31 - 1))
def test_an_8bit_lut_is_indexed_from_the_lowest_code_of_the_ofm_type(dtype, z_in, z_out, seed):
    """A 1x1 average pool (unit scale, Vela's explicit form) through a 256-entry table of the
    OFM's type, on every code: the index is the code less the IFM zero point plus the OFM's,
    clamped to the type, less its lowest code (int8: + 128, uint8: the code itself, the order
    Vela 5.2 writes uint8 tables in)."""
    from ethosu.vela.operation import ExplicitScaling

    info = np.iinfo(dtype)
    z_in, z_out = z_in + info.min, z_out + info.min
    codes = np.arange(info.min, info.max + 1).astype(dtype).reshape(1, 1, 256)
    npu_type = getattr(api.NpuDataType, dtype.upper())
    table = np.random.RandomState(seed).randint(info.min, info.max + 1, 256).astype(dtype)
    op = api.NpuPoolingOperation(api.NpuPoolingOp.AVERAGE)
    op.ifm = _fm((1, 1, 256), npu_type, 0, zp=z_in, scale=1.0)
    op.ofm = _fm((1, 1, 256), npu_type, OFM_BASE, zp=z_out, scale=1.0)
    op.kernel, op.padding = api.NpuKernel(1, 1), api.NpuPadding(0, 0, 0, 0)
    op.rounding_mode = api.NpuRoundingMode.TFL
    op.rescale = ExplicitScaling(False, [0], [1])
    op.activation = api.NpuActivation(api.NpuActivationOp.TABLE_LOOKUP)
    op.activation.lookup_table_index = 0
    mem = _memory(codes, lut=table.tobytes())
    run_stream(_words([op]), mem, ACC_NAME)
    index = np.clip(codes.ravel().astype(np.int64) - z_in + z_out, info.min, info.max)
    assert _ofm(mem, 256, dtype).tolist() == table[index - info.min].astype(np.int64).tolist()


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >> 31 else v


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(*INT32), st.integers(0, 31)), min_size=1, max_size=24),
       st.sampled_from(["SHL", "SHR", "CLZ"]))
def test_shifts_and_clz_on_int32(pairs, kind):
    """The softmax's integer steps against Python integers: SHL by IFM2 wraps to int32, SHR
    (NATURAL) adds half then shifts, CLZ counts the leading zeros of the 32-bit pattern."""
    a = np.array([p[0] for p in pairs], np.int32).reshape(1, 1, -1)
    b = np.array([p[1] for p in pairs], np.int32).reshape(1, 1, -1)
    n = a.size
    op = api.NpuElementWiseOperation(getattr(api.NpuElementWiseOp, kind))
    op.ifm = _fm((1, 1, n), api.NpuDataType.INT32, 0)
    if kind != "CLZ":
        op.ifm2 = _fm((1, 1, n), api.NpuDataType.INT32, IFM2_BASE)
    op.ofm = _fm((1, 1, n), api.NpuDataType.INT32, OFM_BASE)
    op.rounding_mode = api.NpuRoundingMode.NATURAL
    mem = _memory(a, b)
    run_stream(_words([op]), mem, ACC_NAME)
    if kind == "SHL":
        want = [_int32(x << s) for x, s in pairs]
    elif kind == "SHR":
        want = [(x + (1 << s - 1)) >> s if s else x for x, s in pairs]
    else:
        want = [32 - (x & 0xFFFFFFFF).bit_length() for x, _ in pairs]
    assert _ofm(mem, n, np.int32).tolist() == want


def _shr(rounding: str, n: int):
    op = api.NpuElementWiseOperation(api.NpuElementWiseOp.SHR)
    op.ifm = _fm((1, 1, n), api.NpuDataType.INT32, 0)
    op.ifm2 = _fm((1, 1, n), api.NpuDataType.INT32, IFM2_BASE)
    op.ofm = _fm((1, 1, n), api.NpuDataType.INT32, OFM_BASE)
    op.rounding_mode = getattr(api.NpuRoundingMode, rounding)
    return op


def test_a_shift_right_rounded_truncating_is_refused():
    with pytest.raises(StreamError, match=r"\(NPU_OP_ELEMENTWISE\): SHR with rounding mode "
                                          r"1 is not modelled"):
        run_stream(_words([_shr("TRUNCATE", 4)]), _memory(np.zeros(4, np.int32)), ACC_NAME)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(*INT32), st.integers(0, 31)), min_size=1, max_size=16))
@example([(-3, 1), (3, 1), (-6, 2), (6, 2), (-1, 1), (1, 1), (-5, 2)])  # the ties
def test_a_tfl_rounded_shift_right_rounds_ties_away_from_zero(pairs):
    """Vela 3.x's int16 softmax writes its SHRs with TFL rounding (rule 6)."""
    n = len(pairs)
    a = np.array([x for x, _ in pairs], np.int32)
    b = np.array([s for _, s in pairs], np.int32)
    mem = _memory(a, b)
    run_stream(_words([_shr("TFL", n)]), mem, ACC_NAME)
    want = [x if not s else (abs(x) + (1 << s - 1)) >> s if x >= 0
            else -((abs(x) + (1 << s - 1)) >> s) for x, s in pairs]
    assert _ofm(mem, n, np.int32).tolist() == want


def _patched(words, name: str, param: int, payload: int | None = None) -> list[int]:
    """``words`` with every ``name`` command's parameter (and payload) replaced."""
    out = list(int(w) for w in words)
    for cmd in decode_stream(words):
        if cmd.name == name:
            out[cmd.word] = (out[cmd.word] & 0xFFFF) | (param << 16)
            if payload is not None:
                out[cmd.word + 1] = payload
    return out


def _int8_op(kind: str):
    if kind == "MAXPOOL":
        op = api.NpuPoolingOperation(api.NpuPoolingOp.MAX)
        op.kernel = api.NpuKernel(1, 1)
        op.padding = api.NpuPadding(0, 0, 0, 0)
    else:
        op = api.NpuElementWiseOperation(getattr(api.NpuElementWiseOp, kind))
        op.ifm2 = _fm((2, 2, 8), api.NpuDataType.INT8, IFM2_BASE)
    op.ifm = _fm((2, 2, 8), api.NpuDataType.INT8, 0)
    op.ofm = _fm((2, 2, 8), api.NpuDataType.INT8, OFM_BASE)
    return op


def _ofm_precision(words) -> int:
    return [c.param for c in decode_stream(words) if c.name == "NPU_SET_OFM_PRECISION"][-1]


REFUSED = [
    # a clip range without a LUT
    ("ADD", lambda w: _patched(w, "NPU_SET_ACTIVATION", 3 << 12),
     r"activation clip range 3 .* without a LUT is not modelled"),
    # a LUT whose clip range is not one the model reads as an int8 index
    ("ADD", lambda w: _patched(w, "NPU_SET_ACTIVATION", 16 | 5 << 12),
     r"activation clip range 5 with a LUT on a int8 OFM is not modelled"),
    # tanh
    ("ADD", lambda w: _patched(w, "NPU_SET_ACTIVATION", 3), r"activation function 3"),
    # ADD with per-channel scaling (OFM_PRECISION bit 8 clear)
    ("ADD", lambda w: _patched(w, "NPU_SET_OFM_PRECISION", _ofm_precision(w) & ~0x100),
     r"elementwise ADD with per-channel scaling .* is not modelled"),
    # MAX through a global scale that is not the identity
    ("MAX", lambda w: _patched(_patched(w, "NPU_SET_OFM_PRECISION",
                                        _ofm_precision(w) | 0x100),
                               "NPU_SET_OFM_SCALE", 30, 3 << 29),
     r"elementwise MAX with OFM_SCALE \(1610612736, 30\) is not modelled"),
    # (Vela writes no OFM_SCALE for max pooling: one is set ahead of its registers)
    ("MAXPOOL", lambda w: c1("NPU_SET_OFM_SCALE", 1 << 30, 31) + _patched(
        w, "NPU_SET_OFM_PRECISION", _ofm_precision(w) | 0x100),
     r"max pooling with OFM_SCALE \(1073741824, 31\) is not modelled"),
]


@pytest.mark.parametrize("kind,patch,message", REFUSED,
                         ids=["clip-no-lut", "lut-clip5", "tanh", "add-per-channel",
                              "max-scaled", "maxpool-scaled"])
@pytest.mark.parametrize("compute", [True, False], ids=["run", "dry"])
def test_a_register_use_the_model_does_not_implement_names_the_command(
        kind, patch, message, compute):
    words = _words([_int8_op(kind)])
    # unpatched, the operation runs
    run_stream(words, _memory(np.zeros(32, np.int8), np.zeros(32, np.int8)), ACC_NAME)
    words = patch(words)
    op_index = [c.index for c in decode_stream(words) if c.name.startswith("NPU_OP_")][0]
    with pytest.raises(StreamError, match=rf"command #{op_index} \(NPU_OP_\w+\): {message}"):
        run_stream(words, _memory(np.zeros(32, np.int8), np.zeros(32, np.int8)),
                   ACC_NAME, compute=compute)


@pytest.mark.parametrize("activation,message", [
    (17, r"a 16-bit LUT in slot 1 \(ACTIVATION 17\) is not modelled"),
    (16 | 3 << 12, r"activation clip range 3 with a LUT on a int16 OFM is not modelled"),
])
def test_a_16_bit_lut_the_model_does_not_know_is_refused(activation, message):
    """A 16-bit table fills every slot (Vela puts it in slot 0) and is indexed by the OFM's
    own int16 range."""
    op = _int8_op("ADD")
    op.ofm = _fm((2, 2, 8), api.NpuDataType.INT16, OFM_BASE)
    mem = _memory(np.zeros(32, np.int8), np.zeros(32, np.int8))
    run_stream(_patched(_words([op]), "NPU_SET_ACTIVATION", 16), mem, ACC_NAME)
    words = _patched(_words([op]), "NPU_SET_ACTIVATION", activation)
    with pytest.raises(StreamError, match=message):
        run_stream(words, mem, ACC_NAME)


@pytest.mark.parametrize("dtype,activation,message", [
    ("UINT8", 16 | 3 << 12, r"activation clip range 3 with a LUT on a uint8 OFM is not "
                            r"modelled"),
    ("UINT16", 16, r"a LUT activation on a uint16 OFM is not modelled"),
])
def test_an_unsigned_lut_the_model_does_not_know_is_refused(dtype, activation, message):
    """A uint8 table is indexed by the OFM's own uint8 range (clip range 0, what Vela
    writes); a LUT on another unsigned OFM is not modelled."""
    op = _int8_op("ADD")
    op.ofm = _fm((2, 2, 8), getattr(api.NpuDataType, dtype), OFM_BASE)
    mem = _memory(np.zeros(32, np.int8), np.zeros(32, np.int8))
    if dtype == "UINT8":
        run_stream(_patched(_words([op]), "NPU_SET_ACTIVATION", 16), mem, ACC_NAME)
    words = _patched(_words([op]), "NPU_SET_ACTIVATION", activation)
    with pytest.raises(StreamError, match=message):
        run_stream(words, mem, ACC_NAME)
