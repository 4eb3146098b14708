"""Performance model of the Arm Ethos-N78 NPU (1, 2, 4 and 8 TOPS variants).

The planner needs the same kind of estimate Arm's Ethos-N support library uses to pick its own
cascading strategies, so this follows that library (ARM-software/ethos-n-driver-stack,
``support_library``; file and function names in comments), rewritten in our terms:

* MAC engine (MCE) cycles: the output is processed in 4x2 half-patches, input channels in
  groups of IGs x engines and output channels in groups of OGs x engines; a cycle does
  ``IG*E x 8 x OG*E`` MACs for convolutions, ``8 x IG*E`` for depthwise
  (``MceEstimationUtils.cpp: GetMceCycleCountDirect``). 3x3-like kernels at stride 1 use
  Winograd when it needs fewer multiplications (``FindBestConvAlgorithm``,
  ``GetMceCycleCountWinograd``).
* Programmable layer engine (PLE) cycles: 4x4 patches over ``engines x PLE lanes`` channels,
  times a per-kernel cycles-per-patch figure; the PLE processes whole MCE blocks, so the output
  is first rounded up to the block configuration (``EstimationUtils.cpp: GetPleStats,
  GetPleCyclesPerPatch``). The PLE also writes the output stripe out to SRAM.
* MCE and PLE run concurrently: a stripe costs the slower of the two, with a floor of
  2500 cycles per stripe and 100 cycles of per-stripe overhead (``CalculateMetric``).
"""
from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import Sequence

from ethos_arch.accelerators import ACCELERATORS as REGISTRY
from ethos_arch.accelerators import EthosNCore
from ethos_arch.ops import Op
from planner.errors import PlannerError
from planner.graph import Part
from planner.perf.base import PerfModel

#: Every Ethos-N78 variant's core, from the accelerator registry. Source of the figures:
#: ethos-n-driver-stack ``support_library/src/Capabilities.cpp: GetEthosN78FwHwCapabilities``
#: (the ``*_2PLE_RATIO`` variants, the default PLE ratio of Arm NN and TVM's ethos-n target) and
#: ``SetCommonCapabilities`` (8 MAC units per OG, 4x4 patches, 8x8x16 brick groups).
VARIANTS: dict[str, EthosNCore] = {
    a.name: a.core for a in REGISTRY if isinstance(a.core, EthosNCore)
}

# support_library Utils.hpp: g_PatchShape (1, 4, 4, 1), g_BrickGroupShape (1, 8, 8, 16).
PATCH_H, PATCH_W = 4, 4
HALF_PATCH_H, HALF_PATCH_W = 4, 2
BRICK_GROUP = (8, 8, 16)
# EstimationUtils.cpp: CalculateMetric.
PER_STRIPE_OVERHEAD_CYCLES = 100
PER_STRIPE_MINIMUM_CYCLES = 2500
DMA_BYTES_PER_CYCLE = 16.0
# HardwareCapabilities.hpp: Winograd output blocks and MACs per block; wide kernel size 3.
_WINOGRAD_MACS_PER_BLOCK = 16
_WIDE_KERNEL = 3
# Block configurations (width, height) the support library tries by default; Winograd 2D
# limits W*H to TotalAccumulatorsPerOg / 4 = 8*64/4 (FilterAlgoBlockConfigs).
_BLOCK_CONFIGS = ((16, 16), (32, 8), (8, 32), (16, 8), (8, 16), (8, 8))
_ACCUMULATORS_PER_OG = 8 * 64

# EstimationUtils.cpp: GetPleCyclesPerPatch ("estimated from internal benchmarks").
PLE_CYCLES_PER_PATCH = {
    "ADDITION": 15, "ADDITION_RESCALE": 35, "AVGPOOL_3X3_1_1_UDMA": 97, "DOWNSAMPLE_2X2": 10,
    "INTERLEAVE_2X2_2_2": 13, "LEAKY_RELU": 37, "MAXPOOL_2X2_2_2": 13, "MAXPOOL_3X3_2_2": 37,
    "MEAN_XY_8X8": 37, "PASSTHROUGH": 6, "SIGMOID": 76, "TRANSPOSE_XY": 14,
}


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _round_up(a: int, b: int) -> int:
    return _ceil_div(a, b) * b


def _to4(shape: Sequence[int]) -> tuple[int, int, int, int]:
    shape = tuple(int(s) for s in shape)
    if len(shape) >= 4:
        return (math.prod(shape[:-3]),) + shape[-3:]
    return (1,) * (4 - len(shape)) + shape


def _input_region(part: Part, index: int, out_shape: Sequence[int]) -> tuple[int, ...]:
    need = part.propagators[index].apply_shape(out_shape)
    full = part.inputs[index].shape
    return tuple(max(1, min(int(math.ceil(Fraction(n))), f)) for n, f in zip(need, full))


class EthosNPerfModel(PerfModel):
    """``PerfModel`` for one Ethos-N78 variant."""

    def __init__(self, variant: str) -> None:
        if variant not in VARIANTS:
            raise PlannerError(f"unknown Ethos-N78 variant {variant!r}; known: {sorted(VARIANTS)}")
        self.variant = VARIANTS[variant]
        self.name = variant
        #: Stripes are cut in brick groups (NHWCB layout), so align to 8x8x16.
        self.micro_block: tuple[int, int, int] = BRICK_GROUP
        self._cached = lru_cache(maxsize=65536)(self._stripe_cycles)

    def __repr__(self) -> str:
        return f"EthosNPerfModel({self.name!r})"

    # --- MCE -------------------------------------------------------------------------------

    def mce_direct_cycles(self, out: Sequence[int], ifm_channels: int, kernel: tuple[int, int],
                          depthwise: bool) -> int:
        """Direct convolution on the MCE (GetMceCycleCountDirect)."""
        v = self.variant
        n, h, w, c = _to4(out)
        k = kernel[0] * kernel[1]
        if depthwise:
            active_ogs, ifm_per_mac_unit, ifm_per_ofm = v.ifm_channels_per_cycle, 1, 1
        else:
            active_ogs = v.ofm_channels_per_cycle
            ifm_per_mac_unit = v.ifm_channels_per_cycle
            ifm_per_ofm = ifm_channels
        macs = k * _round_up(h, HALF_PATCH_H) * _round_up(w, HALF_PATCH_W) * \
            _round_up(ifm_per_ofm, ifm_per_mac_unit) * _round_up(c, active_ogs)
        per_cycle = ifm_per_mac_unit * v.mac_units_per_og * active_ogs
        return n * (macs // per_cycle)

    def mce_winograd_cycles(self, out: Sequence[int], ifm_channels: int,
                            kernel: tuple[int, int]) -> int:
        """Winograd convolution on the MCE (GetMceCycleCountWinograd)."""
        v = self.variant
        n, h, w, c = _to4(out)
        kh, kw = kernel
        ow, oh = (2, 2)
        if kw == 1:
            ow, oh = 4, 2
        if kh == 1:
            ow, oh = 2, 4
        ifm_consumed = v.ifm_channels_per_cycle
        outputs = _ceil_div(w, ow) * _ceil_div(h, oh)
        macs_per_output = _WINOGRAD_MACS_PER_BLOCK * _ceil_div(kw, _WIDE_KERNEL) * \
            _ceil_div(kh, _WIDE_KERNEL)
        per_ofm = (_round_up(ifm_channels, ifm_consumed) * outputs * macs_per_output) // \
            (ifm_consumed * v.mac_units_per_og)
        return n * per_ofm * _ceil_div(c, v.ofm_channels_per_cycle)

    @staticmethod
    def winograd_pays(kernel: tuple[int, int]) -> bool:
        """Winograd only when it needs fewer multiplications (FindBestConvAlgorithm)."""
        kh, kw = kernel
        if kh == 1 and kw == 1:
            return False
        if kh == 1 or kw == 1:
            direct = kh * kw * 2 * 4
            wino = _WINOGRAD_MACS_PER_BLOCK * _ceil_div(kh * kw, _WIDE_KERNEL)
        else:
            direct = kh * kw * 2 * 2
            wino = _WINOGRAD_MACS_PER_BLOCK * _ceil_div(kw, _WIDE_KERNEL) * \
                _ceil_div(kh, _WIDE_KERNEL)
        return wino < direct

    # --- PLE -------------------------------------------------------------------------------

    @staticmethod
    def block_config(h: int, w: int, winograd_2d: bool = False) -> tuple[int, int]:
        """The (width, height) block that wastes least when the stripe is rounded up to it
        (ties: the larger block)."""
        best = None
        for bw, bh in _BLOCK_CONFIGS:
            if winograd_2d and bw * bh > _ACCUMULATORS_PER_OG // 4:
                continue
            key = (_round_up(h, bh) * _round_up(w, bw), -bw * bh)
            if best is None or key < best[0]:
                best = (key, (bw, bh))
        return best[1]

    def ple_cycles(self, shapes: Sequence[Sequence[int]], op: str,
                   block: tuple[int, int] | None = None) -> int:
        """PLE cycles over 4x4 patches (GetPleStats); ``block`` rounds H and W first."""
        v = self.variant
        ph = pw = pc = 0
        n = 1
        for s in shapes:
            n, h, w, c = _to4(s)
            if block is not None:
                h, w = _round_up(h, block[1]), _round_up(w, block[0])
            ph = max(ph, _ceil_div(h, PATCH_H))
            pw = max(pw, _ceil_div(w, PATCH_W))
            pc = max(pc, _ceil_div(c, v.engines * v.ple_lanes))
        return n * ph * pw * pc * PLE_CYCLES_PER_PATCH[op]

    # --- Parts -----------------------------------------------------------------------------

    @staticmethod
    def _activation_ple(act: str | None) -> str:
        if act in ("sigmoid", "tanh", "hard_swish"):
            return "SIGMOID"
        if act == "leaky_relu":
            return "LEAKY_RELU"
        return "PASSTHROUGH"  # ReLU-style clamps happen in the MCE

    def _stripe_cycles(self, part: Part, out_shape: tuple[int, ...]) -> int:
        """(MCE cycles, PLE cycles) combined: the units overlap, so the slower one counts."""
        kind = part.kind
        out4 = _to4(out_shape)
        n, h, w, c = out4
        act = part.attr("activation")
        mce = ple = 0
        if kind in (Op.CONV2D, Op.DEPTHWISE_CONV2D, Op.FULLY_CONNECTED):
            if kind == Op.FULLY_CONNECTED:
                ifm_c = part.inputs[0].shape[1]
                kernel, stride = (1, 1), (1, 1)
                out4 = (1, 1, out_shape[0], out_shape[1])
            else:
                ifm_c = _input_region(part, 0, out_shape)[3]
                kernel = tuple(part.attr("kernel", (1, 1)))
                stride = tuple(part.attr("strides", (1, 1)))
            groups = int(part.attr("groups", 1))
            depthwise = kind == Op.DEPTHWISE_CONV2D or (groups > 1 and groups == ifm_c)
            if groups > 1 and not depthwise:
                ifm_c = max(1, ifm_c // groups)  # each output channel reads one group
            wino = (kind == Op.CONV2D and not depthwise and stride == (1, 1) and
                    tuple(part.attr("dilation", (1, 1))) == (1, 1) and self.winograd_pays(kernel))
            if wino:
                mce = self.mce_winograd_cycles(out4, ifm_c, kernel)
            else:
                mce = self.mce_direct_cycles(out4, ifm_c, kernel, depthwise)
            block = self.block_config(out4[1], out4[2], wino and kernel[0] > 1 and kernel[1] > 1)
            ple = self.ple_cycles([out4], self._activation_ple(act), block)
        elif kind == Op.POOL:
            kernel = tuple(part.attr("kernel", (1, 1)))
            if part.attr("pool_type") == "max":
                op = "MAXPOOL_2X2_2_2" if kernel == (2, 2) else "MAXPOOL_3X3_2_2"
                scale = max(1, _ceil_div(kernel[0] * kernel[1], 9)) if kernel != (2, 2) else 1
                ple = scale * self.ple_cycles([out4], op, self.block_config(h, w))
            else:
                # Average pooling runs as a depthwise convolution with constant weights.
                mce = self.mce_direct_cycles(out4, c, kernel, True)
                ple = self.ple_cycles([out4], "PASSTHROUGH", self.block_config(h, w))
        elif kind == Op.MEAN:
            ifm = _input_region(part, 0, out_shape)
            ple = self.ple_cycles([ifm], "MEAN_XY_8X8", (8, 8))
        elif kind == Op.ELEMENTWISE:
            op = part.attr("op", "add")
            ple_op = "ADDITION" if op in ("maximum", "minimum") else "ADDITION_RESCALE"
            shapes = [_input_region(part, i, out_shape) for i in range(len(part.inputs))]
            ple = self.ple_cycles(shapes + [out_shape], ple_op)
        elif kind == Op.UNARY:
            op = str(part.attr("op", "relu"))
            ple = self.ple_cycles([out_shape], self._activation_ple(op))
        elif kind in (Op.TRANSPOSE, Op.DEPTH_TO_SPACE):
            ple = self.ple_cycles([out_shape], "TRANSPOSE_XY", (8, 8))
        elif kind == Op.SOFTMAX:
            # Not an Ethos-N78 PLE kernel (Arm NN runs it on the CPU); costed as three
            # LUT-class PLE passes (max, exp, scale) so a graph containing it still plans.
            ple = 3 * self.ple_cycles([out_shape], "SIGMOID")
        elif kind == Op.RESHAPE:
            return 0
        elif kind == Op.CONCATENATE:
            ple = sum(self.ple_cycles([_input_region(part, i, out_shape)], "PASSTHROUGH")
                      for i in range(len(part.inputs)))
        elif kind in (Op.SLICE, Op.PAD):
            ple = self.ple_cycles([out_shape], "PASSTHROUGH")
        elif kind == Op.RESIZE:
            # Upscaling happens in the MCE on its way through an identity depthwise pass.
            mce = self.mce_direct_cycles(out4, c, (1, 1), True)
            ple = self.ple_cycles([out4], "PASSTHROUGH", self.block_config(h, w))
        else:
            raise PlannerError(f"the Ethos-N performance model has no rule for part kind "
                               f"'{kind}' (part {part.name!r})")
        floor = PER_STRIPE_MINIMUM_CYCLES - PER_STRIPE_OVERHEAD_CYCLES
        return int(max(mce, ple, floor))

    def compute_cycles(self, part: Part, out_shape: tuple[int, ...]) -> int:
        """Cycles of one output stripe: the slower of the MCE and the PLE (which also writes
        the stripe out), at least the per-stripe minimum of Arm's estimator."""
        out_shape = tuple(int(s) for s in out_shape)
        if len(out_shape) != len(part.output.shape) or any(s < 1 for s in out_shape):
            raise PlannerError(f"part {part.name!r}: bad stripe {out_shape} for output "
                               f"{part.output.shape}")
        return self._cached(part, out_shape)

    def stripe_overhead_cycles(self, part: Part) -> int:
        """Per-stripe overhead of Arm's estimator (CalculateMetric: 100 cycles)."""
        return 0 if part.kind == Op.RESHAPE else PER_STRIPE_OVERHEAD_CYCLES

    def weight_fetches(self, part: Part, out_shape: tuple[int, ...]) -> int:
        """One: a stripe's weights are DMA'd into SRAM once (Arm's estimator)."""
        return 1

    def fill_drain_cycles(self, part: Part, out_shape: tuple[int, ...]) -> int:
        """None: Arm's estimator costs every stripe alike (its per-stripe minimum and
        overhead are charged to each)."""
        return 0
