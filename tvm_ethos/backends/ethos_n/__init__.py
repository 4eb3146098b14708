"""Arm Ethos-N (N78) backend.

Constraints follow TVM's former Ethos-N integration and the Ethos-N support library's published
limits: quantized int8/uint8 NHWC tensors of batch 1; conv2d and depthwise with kernels up to
7x7, equal strides of 1 or 2, no dilation, padding smaller than the kernel, per-channel weights;
fully connected with per-tensor weights; max pool 1x1/2x2/3x3 stride 2; average pool 3x3
stride 1; mean over H and W of a 7x7 or 8x8 map (keep dims); add and mul of equal shapes;
requantize; reshape; concatenate; sigmoid and tanh with the output quantization TFLite gives
them (1/256, -128; 1/128, 0); leaky relu with 0 < alpha < 1; resize (bilinear or nearest) to
2n or 2n-1 (both odd or both even); split of 4-D tensors (channels in multiples of 16); depth to
space with block size 2. Softmax and pad are not on the Ethos-N list and fall back.
"""
from __future__ import annotations

from ethos_arch.accelerators import ethos_n_name, ethos_n_tops, ethos_n_variants
from ethos_arch.ops import Op
from planner.devices import ETHOS_N78
from tvm_ethos.backends.base import (
    BACKEND_API_VERSION,
    EmulatorLowering,
    LayerSupport,
    NpuBackend,
    OptionSpec,
    Plugin,
)
from tvm_ethos.backends.npu_common import (
    NPU_CAPABILITIES,
    NpuCodegen,
    common_npu_checks,
    no_stream_lines,
    reshape_rank,
)
from tvm_ethos.compute.quant import dtype_range

BACKEND_ID = "ethos-n"
#: The variant and tops values: the Ethos-N configurations of the accelerator registry.
VARIANTS = ethos_n_variants()
TOPS = ethos_n_tops()


def _conv(q, o):
    r = []
    kh, kw = q.weights.shape[0], q.weights.shape[1]
    sh, sw = q.attrs["strides"]
    if not (1 <= kh <= 7 and 1 <= kw <= 7):
        r.append(f"kernel {kh}x{kw}; Ethos-N supports kernels up to 7x7")
    if (sh, sw) not in ((1, 1), (2, 2)):
        r.append(f"strides {sh}x{sw}; Ethos-N supports 1x1 and 2x2")
    if tuple(q.attrs["dilation"]) != (1, 1):
        r.append(f"dilation {q.attrs['dilation']}; Ethos-N supports dilation 1 only")
    pt, pl, pb, pr = q.attrs["padding"]
    if max(pt, pb) >= kh or max(pl, pr) >= kw:
        r.append(f"padding {q.attrs['padding']} is not smaller than the {kh}x{kw} kernel")
    if q.kind == Op.DEPTHWISE_CONV2D and q.attrs.get("depth_multiplier", 1) != 1:
        r.append(f"depth multiplier {q.attrs['depth_multiplier']}; Ethos-N supports 1")
    return r


def _fc(q, o):
    r = []
    if q.per_channel:
        r.append(
            "per-channel quantized weights; Ethos-N fully connected takes per-tensor weights only"
        )
    if q.weights.shape[1] > 65536:
        r.append(f"{q.weights.shape[1]} input features; at most 65536")
    return r


def _maxpool(q, o):
    ps, st = tuple(q.attrs["pool_size"]), tuple(q.attrs["strides"])
    if (ps, st) not in (((1, 1), (2, 2)), ((2, 2), (2, 2)), ((3, 3), (2, 2))):
        return [
            f"max pool {ps[0]}x{ps[1]} stride {st[0]}x{st[1]}; Ethos-N supports 1x1, "
            "2x2 and 3x3 with stride 2"
        ]
    return []


def _avgpool(q, o):
    ps, st = tuple(q.attrs["pool_size"]), tuple(q.attrs["strides"])
    if (ps, st) != ((3, 3), (1, 1)):
        return [
            f"average pool {ps[0]}x{ps[1]} stride {st[0]}x{st[1]}; "
            "Ethos-N supports 3x3 stride 1 only"
        ]
    return []


def _mean(q, o):
    r = []
    if q.attrs.get("axis") not in ((1, 2), (2, 1)):
        r.append(f"mean over axes {q.attrs.get('axis')}; Ethos-N reduces H and W only")
    if not q.attrs.get("keepdims", False):
        r.append("mean without keep_dims")
    hw = tuple(q.in_shapes[0][1:3])
    if hw not in ((7, 7), (8, 8)):
        r.append(f"mean over a {hw[0]}x{hw[1]} map; Ethos-N supports 7x7 and 8x8")
    return r


def _binary(q, o):
    if tuple(q.in_shapes[0]) != tuple(q.in_shapes[1]):
        return [
            f"inputs of shapes {q.in_shapes[0]} and {q.in_shapes[1]}; Ethos-N needs equal shapes"
        ]
    return []


def _none(q, o):
    return []


def _concat(q, o):
    ax = q.attrs["axis"] % len(q.out_shape)
    if len(q.out_shape) != 4 or ax not in (1, 2, 3):
        return [
            f"concatenation along axis {q.attrs['axis']} of a {len(q.out_shape)}-D tensor; Ethos-N "
            "concatenates 4-D tensors along H, W or C"
        ]
    if q.out_q is not None and any(tuple(iq) != tuple(q.out_q) for iq in q.in_q):
        return [f"concatenation with input quantizations {q.in_q} and output {q.out_q}; "
                "Ethos-N's form here copies codes and needs them equal"]
    if q.out_dtype in ("int8", "uint8") and (q.act_min, q.act_max) != dtype_range(q.out_dtype):
        return [f"a fused activation clamping the concatenation to codes {q.act_min} to "
                f"{q.act_max}; Ethos-N's form here copies codes (the clamp stays on the host)"]
    return []


def _tanh(q, o):
    """TVM's former Ethos-N integration: TANH with output scale 1/128, zero point 0 (int8) /
    128 (uint8), the quantization TFLite's converter gives it."""
    want = (1.0 / 128, 128 if q.out_dtype == "uint8" else 0)
    if q.out_q is not None and (abs(q.out_q[0] - want[0]) > 1e-9 or q.out_q[1] != want[1]):
        return [f"tanh output quantization (scale {q.out_q[0]:g}, zero point {q.out_q[1]}); "
                f"Ethos-N needs scale 1/128, zero point {want[1]}"]
    return []


def _sigmoid(q, o):
    """TVM's former Ethos-N integration: LOGISTIC with output scale 1/256, zero point -128
    (int8) / 0 (uint8); the driver stack lists no further restriction."""
    want = (1.0 / 256, 0 if q.out_dtype == "uint8" else -128)
    if q.out_q is not None and (abs(q.out_q[0] - want[0]) > 1e-9 or q.out_q[1] != want[1]):
        return [f"sigmoid output quantization (scale {q.out_q[0]:g}, zero point {q.out_q[1]}); "
                f"Ethos-N needs scale 1/256, zero point {want[1]}"]
    return []


def _leaky_relu(q, o):
    """Ethos-N driver stack: alpha must be less than 1 and greater than 0."""
    alpha = q.attrs.get("alpha", 0.0)
    if not 0.0 < alpha < 1.0:
        return [f"leaky relu alpha {alpha:g}; Ethos-N needs 0 < alpha < 1"]
    return []


def _resize(q, o):
    """Ethos-N driver stack: the resized height and width are 2n or 2n - 1 (n the input size),
    both odd or both even."""
    _, ih, iw, _ = q.in_shapes[0]
    _, oh, ow, _ = q.out_shape
    r = []
    if oh not in (2 * ih, 2 * ih - 1) or ow not in (2 * iw, 2 * iw - 1):
        r.append(f"resize {ih}x{iw} -> {oh}x{ow}; Ethos-N resizes to 2n or 2n-1")
    elif oh % 2 != ow % 2:
        r.append(f"resize to {oh}x{ow}; Ethos-N needs height and width both odd or both even")
    return r


def _split(q, o):
    """Ethos-N driver stack SUPPORTED.md: a split of the channels (the 3rd dimension) must keep
    multiples of 16 channels; each SPLIT output is checked as its own slice."""
    if len(q.in_shapes[0]) != 4:
        return [f"split of a {len(q.in_shapes[0])}-D tensor; Ethos-N splits 4-D tensors"]
    if q.attrs.get("stride", 1) != 1:
        return [f"a slice with stride {q.attrs['stride']}; Ethos-N slices contiguous boxes"]
    axis, b, e = q.attrs.get("axis"), q.attrs.get("begin", 0), q.attrs.get("end", 0)
    if axis == 3 and (b % 16 or (e - b) % 16):
        return [f"split of channels [{b}, {e}); Ethos-N splits channels in multiples of 16"]
    return []


def _depth_to_space(q, o):
    """Ethos-N driver stack SUPPORTED.md: block size 2 (depth a multiple of 4)."""
    b = q.attrs.get("block_size")
    if b != 2:
        return [f"depth to space with block size {b}; Ethos-N supports block size 2"]
    return []


CHECKS = {
    Op.CONV2D: _conv,
    Op.DEPTHWISE_CONV2D: _conv,
    Op.FULLY_CONNECTED: _fc,
    Op.MAX_POOL2D: _maxpool,
    Op.AVG_POOL2D: _avgpool,
    Op.MEAN: _mean,
    Op.ADD: _binary,
    Op.MUL: _binary,
    Op.REQUANTIZE: _none,
    Op.RESHAPE: reshape_rank,
    Op.CONCATENATE: _concat,
    Op.SIGMOID: _sigmoid,
    Op.TANH: _tanh,
    Op.LEAKY_RELU: _leaky_relu,
    Op.RESIZE_BILINEAR: _resize,
    Op.RESIZE_NEAREST: _resize,
    Op.SPLIT: _split,
    Op.DEPTH_TO_SPACE: _depth_to_space,
}


class EthosNBackend(NpuBackend):
    """Arm Ethos-N's whole contract: the planner's Ethos-N78 devices, the support library's
    operator limits and the emulator; it has no command-stream generator, so the emulator runs
    every subgraph."""

    backend_id = BACKEND_ID
    device_options = ("variant", "tops")

    def options_schema(self):
        return {
            "variant": OptionSpec("n78", allowed=VARIANTS, help="Ethos-N variant"),
            "tops": OptionSpec(1, allowed=TOPS, help="tera-operations per second"),
            "ple_ratio": OptionSpec(2, allowed=(2, 4), help="PLE ratio"),
            "sram_size": OptionSpec(
                0,
                validator=lambda v: isinstance(v, int) and v >= 0,
                help="an integer >= 0 (bytes; 0 = default)",
            ),
        }

    def layer_support(self):
        return LayerSupport(CHECKS, common=lambda q, o: common_npu_checks(q, o))

    def codegen_factory(self):
        return NpuCodegen(self.backend_id)

    def capabilities(self):
        return NPU_CAPABILITIES

    def planner_device_name(self, options):
        return ethos_n_name(options.get("variant", "n78"), options.get("tops", 1))

    def planner_sram_size(self, options):
        size = int(options.get("sram_size", 0) or 0)
        return size if size > 0 else None

    def planner_device_names(self):
        return ETHOS_N78

    def emulator_lowering(self):
        return EmulatorLowering()

    def command_stream(self, lowered, options: dict, planned=None):
        return None

    def stream_report(self, payload, planned_peak: int | None) -> dict:
        raise NotImplementedError("Ethos-N makes no command stream (command_stream is None)")

    def stream_report_lines(self, entry):
        return no_stream_lines(entry)


plugin = Plugin(BACKEND_ID, BACKEND_API_VERSION, EthosNBackend)
