"""Part matchers: the TE graph of an NPU subgraph as a planner ``PlannerGraph``.

One planner Part is one NPU operation, which ``te_ops`` lowers to several ComputeOps: a
convolution is an int32 accumulation stage (a reduction) and an int8 requantization stage; an
ADD is two int32 rescale stages and an int8 output stage. The matcher groups them by what the
NPU keeps internal:

* a *feature-map* ComputeOp (int8 / uint8 / int16 output, or a subgraph output) is the root of
  a Part; its output is the Part's output tensor;
* every ComputeOp with another output type (the int32 accumulators and rescaled inputs) that a
  root reaches without passing through another feature map belongs to that root's Part;
* placeholders are the Part's inputs: the subgraph's activation inputs, or constants (weights,
  bias; the per-channel requantization multipliers and shifts are left out, as the NPU carries
  them in the bias/scale stream that Vela and ``planner.tflite`` cost as the int32 bias).

Propagators are derived from the TE index expressions. Every read ``X[i_0, ..., i_n]`` of every
stage is simplified with the ranges of the stage's iteration variables and, where it is affine
(sums of variables times constants, and ``floordiv`` by a constant), expressed in the root's
output variables and the reduction variables of the stages on the path. A dimension that reads
``sum_j a_j * o_j + sum_r b_r * r + c`` (``r`` in ``[0, E_r)``) for an output box ``[o, o + S)``
reads ``[sum a_j o_j + c + sum_{b_r<0} b_r (E_r - 1), +sum a_j (S_j - 1) + sum |b_r| (E_r - 1) +
1)``: linear ``a_j``, constant ``sum |b_r| (E_r - 1) + 1 - sum a_j``, offset ``c + sum_{b_r<0} b_r
(E_r-1)``, which is the planner's window formula (``planner/parts.py``). A dimension that is not
affine falls back to the whole input extent (an opaque propagator along that dimension only).

The kind of a Part and the attributes its performance model needs (kernel, strides, dilation,
padding, activation) come from the TE structure: a reduction over a sliding window that also
reads a weight constant is a convolution (depthwise when the input channel follows the output
channel), a window reduction without weights is a pool, a reduction over the whole H and W is
a mean, ... The lowering's operator list (``LoweredSubgraph.layers``) only names the fused
activation and tells ADD from MUL.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable

from tvm import te, tirx
from tvm.ir import Range
from tvm.sym import Analyzer

from ethos_arch.mean_window import mean_kernel
from ethos_arch.ops import Op
from planner.graph import Part, PlannerGraph, Tensor
from planner.parts import (
    DEPTH_REDUCTIONS,
    arg_max_piece_pixels,
    arg_max_rows_cols,
    arg_max_work_bytes,
    lstm,
    reduce_over_depth_work_bytes,
)
from planner.propagator import Propagator
from planner.vela_layouts import vela_layouts
from planner.work_memory import WORK_ATTR, WorkMemory
from tvm_ethos.compute.lstm import STATE_CONST_SUFFIXES
from tvm_ethos.errors import CompileError
from tvm_ethos.qop import activation_name as _activation_name

FEATURE_MAP_DTYPES = ("int8", "uint8", "int16")
#: constants the NPU carries in its bias/scale stream (not separate planner tensors; the low
#: bits of a 16x8 bias beyond 32 bits, ``te_ops.BIAS_LOW_SUFFIX``, too)
REQUANT_CONST_SUFFIXES = ("_mult", "_shift", "_bias_low")
#: lookup tables (LOGISTIC / TANH / LEAKY_RELU codes, SOFTMAX exponentials, an int16
#: SOFTMAX's reciprocals): Vela keeps an activation's LUT in the NPU's own LUT memory, not in
#: the SRAM the planner budgets
LUT_CONST_SUFFIXES = ("_table", "_exp")


# --------------------------------------------------------------------------- expression walks
def _children(e):
    """Sub-expressions of a TIR expression (the node kinds te_ops produces)."""
    if isinstance(e, tirx.Reduce):
        return list(e.source) + [e.condition]
    for names in (("a", "b"), ("value",), ("condition", "true_value", "false_value")):
        if all(hasattr(e, n) for n in names):
            return [getattr(e, n) for n in names]
    if hasattr(e, "args") and not isinstance(e, te.Tensor):
        return [a for a in e.args if not isinstance(a, te.Tensor)]
    return []


def tensor_loads(expr) -> list[tuple[te.Tensor, list]]:
    """Every ``te.tensor_load`` in ``expr``: (tensor, index expressions)."""
    out = []
    stack = [expr]
    while stack:
        e = stack.pop()
        op = getattr(e, "op", None)
        if op is not None and getattr(op, "name", None) == "te.tensor_load":
            out.append((e.args[0], list(e.args[1:])))
            stack.extend(e.args[1:])
            continue
        stack.extend(_children(e))
    return out


@dataclass(frozen=True)
class Affine:
    """``sum coef[v] * v + const`` over iteration variables (by name), exact fractions."""
    coef: tuple  # ((var name, Fraction), ...)
    const: Fraction

    def get(self, name: str) -> Fraction:
        for n, c in self.coef:
            if n == name:
                return c
        return Fraction(0)

    @staticmethod
    def make(coef: dict, const) -> "Affine":
        return Affine(tuple(sorted((k, Fraction(v)) for k, v in coef.items() if v != 0)),
                      Fraction(const))

    def substitute(self, env: dict) -> "Affine | None":
        """Replace variables by affine forms (variables not in ``env`` stay)."""
        coef: dict = {}
        const = self.const
        for n, c in self.coef:
            if n in env:
                sub = env[n]
                if sub is None:
                    return None
                const += c * sub.const
                for m, d in sub.coef:
                    coef[m] = coef.get(m, 0) + c * d
            else:
                coef[n] = coef.get(n, 0) + c
        return Affine.make(coef, const)


def to_affine(expr) -> Affine | None:
    """An affine form of an index expression, or None."""
    if isinstance(expr, tirx.IntImm) or isinstance(expr, int):
        return Affine.make({}, int(expr))
    if isinstance(expr, tirx.Var):
        return Affine.make({expr.name: 1}, 0)
    if isinstance(expr, tirx.Cast):
        return to_affine(expr.value)
    if isinstance(expr, (tirx.Add, tirx.Sub)):
        a, b = to_affine(expr.a), to_affine(expr.b)
        if a is None or b is None:
            return None
        s = 1 if isinstance(expr, tirx.Add) else -1
        coef = dict(a.coef)
        for n, c in b.coef:
            coef[n] = coef.get(n, 0) + s * c
        return Affine.make(coef, a.const + s * b.const)
    if isinstance(expr, tirx.Mul):
        a, b = to_affine(expr.a), to_affine(expr.b)
        if a is None or b is None:
            return None
        if not a.coef:
            a, b = b, a
        if b.coef:
            return None
        k = b.const
        return Affine.make({n: c * k for n, c in a.coef}, a.const * k)
    if isinstance(expr, tirx.FloorDiv) and isinstance(expr.b, tirx.IntImm) and int(expr.b) > 0:
        # floordiv(x, m) reads x/m rounded down: the planner's fractional propagator
        # (``Fraction`` linear parts; ``StripeConfig.propagate`` adds the rounding slack)
        a = to_affine(expr.a)
        if a is None:
            return None
        m = int(expr.b)
        return Affine.make({n: c / m for n, c in a.coef}, a.const / m)
    return None


def _var_ranges(op) -> dict:
    out = {}
    for iv in list(op.axis) + list(getattr(op, "reduce_axis", [])):
        out[iv.var] = iv.dom
    return out


_READS_CACHE: dict = {}


def stage_reads(op) -> list[tuple[te.Tensor, list, list]]:
    """Reads of one ComputeOp: (tensor, simplified index expressions, affine forms or None)."""
    hit = _READS_CACHE.get(op)
    if hit is not None:
        return hit
    ana = Analyzer()
    for v, dom in _var_ranges(op).items():
        # extent-1 variables are left free: binding them would fold them to 0 and lose the
        # linear coefficient (the batch axis, a 1-row output) that the planner's
        # propagators keep
        if int(dom.extent) > 1:
            ana.bind(v, Range(dom.min, dom.min + dom.extent))
    out = []
    for body in op.body:
        for t, idx in tensor_loads(body):
            # an index that reads a tensor (a table lookup) is no affine form, and TVM's
            # simplifier cannot hash the loads of some of them
            simp = [i if tensor_loads(i) else ana.simplify(i) for i in idx]
            out.append((t, simp, [to_affine(i) for i in simp]))
    if len(_READS_CACHE) > 4096:
        _READS_CACHE.clear()
    _READS_CACHE[op] = out
    return out


# --------------------------------------------------------------------------- matched parts
@dataclass
class AccessMap:
    """How a Part's output box maps onto one input, per input dimension: an affine form in the
    root's output variables and reduction variables (with their extents), or None."""
    dims: list  # Affine | None per input dim
    reduce_extent: dict  # reduction var name -> extent

    def propagator(self, out_vars: list[str], in_shape: tuple[int, ...]) -> Propagator:
        lin, const, off = [], [], []
        for d, a in enumerate(self.dims):
            if a is None or any(n not in out_vars and n not in self.reduce_extent
                                for n, _ in a.coef):
                lin.append([0] * len(out_vars))
                const.append(in_shape[d])
                off.append(0)
                continue
            row = [a.get(v) for v in out_vars]
            red = sum(abs(c) * (self.reduce_extent[n] - 1) for n, c in a.coef
                      if n in self.reduce_extent)
            low = sum(c * (self.reduce_extent[n] - 1) for n, c in a.coef
                      if n in self.reduce_extent and c < 0)
            if any(x < 0 for x in row):
                # a reversed axis: read the whole extent (never produced by te_ops)
                lin.append([0] * len(out_vars))
                const.append(in_shape[d])
                off.append(0)
                continue
            lin.append(row)
            const.append(red + 1 - sum(row))
            off.append(a.const + low)
        return Propagator.build(lin, const, off)

    @property
    def affine(self) -> bool:
        return all(a is not None for a in self.dims)


@dataclass
class MatchedPart:
    """One planner Part and the TE it covers."""
    part: Part
    root: te.Tensor                      # the feature-map ComputeOp (the Part's output)
    stages: list[te.Tensor]              # internal ComputeOps, producers first
    inputs: list[te.Tensor]              # TE tensors of ``part.inputs``, same order
    access: list[AccessMap]              # derived access maps, same order
    layer: object = None                 # the lowering's QOp, when known
    window: dict = field(default_factory=dict)  # kernel/strides/dilation/padding when windowed
    const_perm: dict = field(default_factory=dict)  # constant name -> planner axis i = TE axis

    @property
    def reductions(self) -> list[te.Tensor]:
        return [s for s in self.stages if getattr(s.op, "reduce_axis", None)]

    @property
    def injective(self) -> list[te.Tensor]:
        return [s for s in self.stages if not getattr(s.op, "reduce_axis", None)]

    def affine(self, k: int) -> bool:
        return self.access[k].affine


@dataclass
class MatchResult:
    graph: PlannerGraph
    parts: list[MatchedPart]
    te_of: dict  # planner tensor name -> te.Tensor

    def part(self, name: str) -> MatchedPart:
        for mp in self.parts:
            if mp.part.name == name:
                return mp
        raise KeyError(name)

    def by_output(self, tensor_name: str) -> MatchedPart | None:
        for mp in self.parts:
            if mp.part.output.name == tensor_name:
                return mp
        return None


def _is_compute(t) -> bool:
    return isinstance(t.op, te.ComputeOp)


def _name(t) -> str:
    return t.op.name


def _is_extern(t) -> bool:
    """A whole operator computed by one extern stage (an LSTM, ``compute.lstm``)."""
    return isinstance(t.op, te.ExternOp)


def _topo(outputs) -> list:
    """ComputeOps, extern stages and placeholders reachable from ``outputs``, producers first
    (deterministic: inputs visited in the order the op reads them)."""
    order, seen = [], set()

    def visit(t):
        key = _name(t)
        if key in seen:
            return
        seen.add(key)
        if _is_compute(t) or _is_extern(t):
            for x in t.op.input_tensors:
                visit(x)
        order.append(t)

    for t in outputs:
        visit(t)
    return order


def _compose(root, stages_by_name: dict) -> dict[str, list[AccessMap]]:
    """Access maps of every tensor read from ``root`` or its internal stages, by name."""
    results: dict[str, list[AccessMap]] = {}
    root_vars = [iv.var.name for iv in root.op.axis]
    # a stage reached again with the same index forms and reductions (a diamond of stages)
    # would only add the same maps again, which _merge reads as one: walked once
    walked: set = set()

    def walk(t, env: dict, red: dict, depth: int):
        if depth > 16:
            raise CompileError(f"part matcher: stage chain under {_name(root)} is too deep")
        key = (_name(t), tuple(env.items()), tuple(red.items()))
        if key in walked:
            return
        walked.add(key)
        for x, _, aff in stage_reads(t.op):
            local_red = dict(red)
            for iv in getattr(t.op, "reduce_axis", []):
                local_red[f"{_name(t)}.{iv.var.name}"] = int(iv.dom.extent)
            # rename this stage's reduce vars to qualified names, then map its axis vars
            rename = {iv.var.name: Affine.make({f"{_name(t)}.{iv.var.name}": 1}, 0)
                      for iv in getattr(t.op, "reduce_axis", [])}
            dims = []
            for a in aff:
                if a is None:
                    dims.append(None)
                    continue
                a2 = a.substitute(rename)
                dims.append(a2.substitute(env) if a2 is not None else None)
            if _is_compute(x) and _name(x) in stages_by_name:
                child_env = {}
                for iv, d in zip(x.op.axis, dims):
                    child_env[iv.var.name] = d
                walk(x, child_env, local_red, depth + 1)
            else:
                results.setdefault(_name(x), []).append(AccessMap(dims, local_red))

    env = {v: Affine.make({v: 1}, 0) for v in root_vars}
    walk(root, env, {}, 0)
    return results


def _merge(maps: list[AccessMap], in_shape) -> AccessMap:
    """One map covering several reads of the same input (equal maps are the common case)."""
    if len(maps) == 1:
        return maps[0]
    first = maps[0]
    if all(m.dims == first.dims for m in maps[1:]):
        red = {}
        for m in maps:
            red.update(m.reduce_extent)
        return AccessMap(first.dims, red)
    return AccessMap([None] * len(in_shape), {})


def _window_of(mp_root, access: AccessMap, in_shape, out_shape):
    """Kernel, stride, dilation and padding along H and W of an NHWC window read, or None."""
    if len(in_shape) != 4 or len(out_shape) != 4:
        return None
    out_vars = [iv.var.name for iv in mp_root.op.axis]
    win = {}
    for axis, key in ((1, "h"), (2, "w")):
        a = access.dims[axis]
        if a is None:
            return None
        s = a.get(out_vars[axis])
        others = [n for n, _ in a.coef if n != out_vars[axis]]
        if any(n in out_vars for n in others) or s.denominator != 1 or s < 1:
            return None
        red = [(n, c) for n, c in a.coef if n in access.reduce_extent]
        if len(red) > 1:
            return None
        if red:
            (rn, d), = red
            k = access.reduce_extent[rn]
            d = int(d)
        else:
            k, d = 1, 1
        if a.const.denominator != 1 or d < 1:
            return None
        pt = int(-a.const)
        eff = d * (k - 1) + 1
        pb = (out_shape[axis] - 1) * int(s) + eff - in_shape[axis] - pt
        win[key] = (k, int(s), d, pt, max(pb, 0))
    return {
        "kernel": (win["h"][0], win["w"][0]), "strides": (win["h"][1], win["w"][1]),
        "dilation": (win["h"][2], win["w"][2]),
        "padding": (win["h"][3], win["w"][3], win["h"][4], win["w"][4]),
    }


def _reduce_kind(t) -> str | None:
    """'sum' or 'max' for a reduction ComputeOp."""
    body = t.op.body[0]
    if not isinstance(body, tirx.Reduce):
        return None
    comb = body.combiner
    res = comb.result[0]
    if isinstance(res, tirx.Add):
        return "sum"
    if isinstance(res, tirx.Max):
        return "max"
    return "other"


def match_subgraph(lowered, name: str | None = None,
                   work: Callable[[Any], WorkMemory | None] | None = None) -> MatchResult:
    """The PlannerGraph of one lowered NPU subgraph (``tvm_ethos.compute.subgraph``);
    ``work(layer)``: the working memory the NPU's code needs for a layer, which its Part
    carries for the planner (``planner.work_memory``; ``NpuBackend.planner_work``)."""
    inputs = list(lowered.input_tensors)
    consts = list(lowered.const_tensors)
    if not inputs and not consts:
        raise CompileError("part matcher: the lowered subgraph carries no placeholders "
                           "(lower it with tvm_ethos.compute.subgraph.lower_function)")
    const_names = {_name(t) for t in consts}
    out_names = {_name(t) for t in lowered.outputs}
    layer_of = {}
    for (lname, t), q in zip(lowered.tensors.items(), lowered.layers):
        layer_of[_name(t)] = q

    order = _topo(lowered.outputs)
    roots = [t for t in order if _is_extern(t) or _is_compute(t) and
             (str(t.dtype) in FEATURE_MAP_DTYPES or _name(t) in out_names
              or _writes_indices(layer_of.get(_name(t))))]
    root_names = {_name(t) for t in roots}
    owner: dict[str, str] = {}
    stages_of: dict[str, list] = {}
    for r in roots:
        stack, mine = list(r.op.input_tensors), {}
        while stack:
            x = stack.pop()
            if not _is_compute(x) or _name(x) in root_names or _name(x) in mine:
                continue
            mine[_name(x)] = x
            stack.extend(x.op.input_tensors)
        for n in mine:
            if n in owner:
                raise CompileError(f"part matcher: internal stage {n} is read by both "
                                   f"{owner[n]} and {_name(r)}")
            owner[n] = _name(r)
        stages_of[_name(r)] = [t for t in order if _name(t) in mine]

    tensors: dict[str, Tensor] = {}
    te_of: dict[str, te.Tensor] = {}

    def ptensor(t, shape=None) -> Tensor:
        n = _name(t)
        if n not in tensors:
            tensors[n] = Tensor(n, shape or tuple(int(s) for s in t.shape), str(t.dtype),
                                is_constant=n in const_names)
            te_of[n] = t
        return tensors[n]

    for t in inputs:
        ptensor(t)
    parts: list[MatchedPart] = []
    for r in roots:
        if _is_extern(r):
            parts.append(_lstm_part(r, layer_of.get(_name(r)), ptensor, const_names))
            continue
        stages = stages_of[_name(r)]
        by_name = {_name(s): s for s in stages}
        # inputs in first-read order: activations, then constants
        seen, ins = set(), []
        for s in [r] + list(reversed(stages)):
            for x in s.op.input_tensors:
                if _name(x) in seen or _name(x) in by_name:
                    continue
                if _is_compute(x) and _name(x) not in root_names:
                    continue
                seen.add(_name(x))
                ins.append(x)
        acts = [x for x in ins if _name(x) not in const_names]
        cons = [x for x in ins if _name(x) in const_names and
                not _name(x).endswith(REQUANT_CONST_SUFFIXES + LUT_CONST_SUFFIXES)]
        cons.sort(key=lambda x: -len(x.shape))  # weights before bias, as planner.parts
        ins = acts + cons
        out_vars = [iv.var.name for iv in r.op.axis]
        maps = []
        reads = _compose(r, by_name)
        for x in ins:
            shape = tuple(int(s) for s in x.shape)
            maps.append(_merge(reads.get(_name(x)) or [AccessMap([None] * len(shape), {})],
                               shape))
        layer = layer_of.get(_name(r))
        kind, attrs, window = _classify(r, stages, ins, acts, maps, layer, const_names)
        # a Part whose kind states its own working memory (an ARG_MAX's) keeps that figure
        needs = None if work is None or layer is None or WORK_ATTR in attrs \
            else work(layer)
        if needs is not None:
            attrs = dict(attrs, **{WORK_ATTR: needs})
        perms, ptensors, props = {}, [], []
        for x, m in zip(ins, maps):
            shape = tuple(int(s) for s in x.shape)
            prop = m.propagator(out_vars, shape)
            if _name(x) in const_names:
                perm = _const_layout(kind, m, out_vars, shape)
                perms[_name(x)] = perm
                prop = _permute_rows(prop, perm)
                ptensors.append(ptensor(x, tuple(shape[a] for a in perm)))
            else:
                ptensors.append(ptensor(x))
            props.append(prop)
        if layer is not None and layer.kind == Op.TRANSPOSE_CONV2D:
            # each output stripe planned to read its whole input (the TE's strided reads,
            # floordiv of the output row, are no affine map)
            shape = ptensors[0].shape
            props[0] = Propagator.build([[0] * len(out_vars)] * len(shape), list(shape),
                                        [0] * len(shape))
        part = Part(_part_name(r, layer_of), kind, tuple(ptensors), ptensor(r), tuple(props),
                    attrs)
        parts.append(MatchedPart(part, r, stages, ins, maps, layer, window or {}, perms))
    # parts in the order the scheduled TIR runs them in: the PrimFunc's blocks, which
    # create_prim_func lays out in this same post-order of the TE graph (read here from TE,
    # so a compile that schedules no TIR makes no PrimFunc)
    rank = {n: k for k, n in enumerate(_name(t) for t in order if _is_compute(t))}
    parts.sort(key=lambda mp: rank.get(_name(mp.root), len(rank)))
    ins_t = tuple(ptensor(t) for t in inputs)
    outs_t = tuple(ptensor(t) for t in lowered.outputs)
    laid = vela_layouts([mp.part for mp in parts], ins_t, outs_t)
    for mp, p in zip(parts, laid):
        mp.part = p
    graph = PlannerGraph(tuple(mp.part for mp in parts), ins_t, outs_t,
                         name or getattr(lowered, "symbol", "subgraph"))
    return MatchResult(graph, parts, te_of)


def _lstm_part(r, layer, ptensor, const_names) -> MatchedPart:
    """The Part of an LSTM's extern stage: ``planner.parts.lstm`` (the Part the tflite-micro
    host plans from the TFLite graph) over the stage's sequence, its weights and biases
    the lowering's two constants (its activation tables are the NPU's LUTs, no planner
    tensors)."""
    if layer is None or layer.kind != Op.LSTM:
        raise CompileError(f"part matcher: extern stage {_name(r)} is no LSTM")
    x, weights, bias = [t for t in r.op.input_tensors
                        if not _name(t).endswith(LUT_CONST_SUFFIXES + STATE_CONST_SUFFIXES)]
    if _name(x) in const_names or _name(weights) not in const_names:
        raise CompileError(f"part matcher: LSTM {_name(r)} reads no sequence and weights")
    q = layer.attrs["quantization"]
    cells = int(weights.shape[1])
    name = _name(r)[:-4] if _name(r).endswith("_out") else _name(r)
    part = lstm(name, ptensor(x), cells, time_major=q.time_major, output_name=_name(r))
    ins = (ptensor(x), ptensor(weights), ptensor(bias))
    part = dataclasses.replace(part, inputs=ins, output=ptensor(r, part.output.shape))
    access = [AccessMap([None] * len(t.shape), {}) for t in (x, weights, bias)]
    return MatchedPart(part, r, [], [x, weights, bias], access, layer)


def _writes_indices(layer) -> bool:
    """An operator whose output is no feature map of codes but its own Part's output all the
    same: ARG_MAX's int32 / int64 indices."""
    return layer is not None and layer.kind == Op.ARG_MAX


def _const_layout(kind: str, access: "AccessMap", out_vars: list[str], shape) -> tuple:
    """The planner's layout of a constant as a permutation of its TE axes (planner axis i is
    TE axis perm[i]): output channels first for convolution weights ((O, KH, KW, I), as
    ``planner.parts.conv2d``), the size-1 input axis first for depthwise weights
    ((1, KH, KW, C), as ``planner.parts.depthwise_conv2d``); other constants as they are.
    The planner stages weights in SRAM in slices of output channels along axis 0."""
    rank = len(shape)
    if rank != 4 or kind not in (Op.CONV2D, Op.DEPTHWISE_CONV2D):
        return tuple(range(rank))
    oc = out_vars[-1]
    follows = [a for a, d in enumerate(access.dims) if d is not None and d.get(oc) != 0]
    if kind == Op.CONV2D and len(follows) == 1:
        lead = follows[0]
    elif kind == Op.DEPTHWISE_CONV2D:
        ones = [a for a in range(rank) if shape[a] == 1 and a not in follows]
        lead = ones[-1] if ones else None
    else:
        lead = None
    if lead is None:
        return tuple(range(rank))
    return (lead,) + tuple(a for a in range(rank) if a != lead)


def _permute_rows(prop: Propagator, perm) -> Propagator:
    """The propagator of a constant seen through the axis permutation ``perm``."""
    rows = prop.transform[:-1]
    return Propagator(tuple(rows[a] for a in perm) + (prop.transform[-1],),
                      tuple(prop.offset[a] for a in perm))


def _part_name(r, layer_of) -> str:
    n = _name(r)
    return n[:-4] if n.endswith("_out") and n in layer_of else n


def _slice_attrs(layer, x_shape, out_shape) -> tuple[str, dict]:
    """A slice Part; of a batch above 1 it names its operator (SPLIT), which a device may
    keep out of cascades (the Ethos-U copies a batch as rows of whole tensors)."""
    begin = [0] * len(x_shape)
    begin[layer.attrs["axis"]] = layer.attrs["begin"]
    batched = {"op": Op.SPLIT.value} if len(x_shape) == 4 and int(x_shape[0]) > 1 else {}
    stride = layer.attrs.get("stride", 1)
    if stride == 1:
        return Op.SLICE, {"begin": tuple(begin), **batched}
    strides = [1] * len(x_shape)
    strides[layer.attrs["axis"]] = stride
    return Op.SLICE, {"begin": tuple(begin), "steps": tuple(strides), **batched}


#: data-movement operators as planner.parts builds them (kind, attrs); their propagators come
#: from the TE reads like every Part's: pad and slice are shifted identities, a nearest resize
#: by an integer factor is ``floor(o / s)`` (its other ratios, and depth to space's channel
#: index ``(h % b * b + w % b) * C + c``, are not affine and read the whole extent there).
#: Where the kind is coarser than the operator (a PAD, a RESIZE, a RESHAPE costed as a copy),
#: ``op`` names the operator, so that a device can tell which it runs
#: (``planner.graph.part_operator``, ``Device.solitary``).
_DATA_MOVEMENT_PARTS = {
    Op.PAD: lambda layer, x, o: (Op.PAD, {"pads": tuple(layer.attrs["pad_width"])}),
    # costed as a PAD; its reflected reads are not affine (whole rows and columns)
    Op.MIRROR_PAD: lambda layer, x, o: (Op.PAD, {"pads": tuple(layer.attrs["pad_width"]),
                                                  "op": layer.kind.value}),
    # costed as a copy (``op`` names it: never an alias of its input)
    Op.REVERSE: lambda layer, x, o: (Op.RESHAPE, {"op": layer.kind.value}),
    # costed as a copy; every output stripe reads the input modulo its shape (whole extent)
    Op.TILE: lambda layer, x, o: (Op.RESHAPE, {"op": layer.kind.value}),
    Op.TRANSPOSE: lambda layer, x, o: (Op.TRANSPOSE, {"perm": tuple(layer.attrs["perm"])}),
    Op.SPLIT: _slice_attrs,
    Op.RESIZE_NEAREST: lambda layer, x, o: (
        Op.RESIZE, {"method": "nearest", "scale": (-(-o[1] // x[1]), -(-o[2] // x[2])),
                    "op": layer.kind.value}),
    Op.DEPTH_TO_SPACE: lambda layer, x, o: (Op.DEPTH_TO_SPACE,
                                           {"block_size": layer.attrs["block_size"]}),
}


#: reductions over the whole H and W costed as Vela's MEAN (one pass over the input):
#: REDUCE_MAX / REDUCE_MIN are a single-window pool and SUM is MEAN's convolution on the NPU
_GLOBAL_REDUCTIONS = frozenset({Op.MEAN, Op.REDUCE_MAX, Op.REDUCE_MIN, Op.REDUCE_SUM})


def _transpose_conv_attrs(layer, act) -> dict:
    """A TRANSPOSE_CONV costed as the CONV_2D the NPU runs (Vela's form): stride 1 over the
    input upscaled by its stride, each output reading every tap; its propagator (from the
    TE's strided reads, not affine) takes the input's whole extent."""
    # a kernel below the stride runs padded with zero taps up to it (ops_transpose_conv)
    kh, kw = (max(int(k), int(s)) for k, s in zip(layer.weights.shape[:2],
                                                    layer.attrs["strides"]))
    pt, pl, pb, pr = (int(v) for v in layer.attrs["padding"])
    extra = 1 if 2 in tuple(layer.attrs["strides"]) else 0  # the upscale's trailing zero
    padding = (kh - 1 - pt, kw - 1 - pl, kh - 1 - pb - extra, kw - 1 - pr - extra)
    return {"kernel": (kh, kw), "strides": (1, 1), "dilation": (1, 1),
            "padding": tuple(max(p, 0) for p in padding), "groups": 1, "activation": act,
            "op": layer.kind.value}


def _classify(r, stages, ins, acts, maps, layer, const_names):
    """(kind, attrs, window) of a Part from its TE structure."""
    act = _activation_name(layer)
    out_shape = tuple(int(s) for s in r.shape)
    reds = [s for s in stages if getattr(s.op, "reduce_axis", None)] + \
        ([r] if getattr(r.op, "reduce_axis", None) else [])
    if not acts:
        return Op.UNARY, {"op": "constant"}, None
    x_shape = tuple(int(s) for s in acts[0].shape)
    amap = maps[0]
    if layer is not None and layer.kind == Op.SOFTMAX:
        # planner.tflite's kind; the propagator (each output row reads its whole input row:
        # max and sum) comes from the TE reads as for every Part
        return Op.SOFTMAX, {"beta": layer.attrs.get("beta", 1.0)}, None
    if layer is not None and layer.kind == Op.RESIZE_BILINEAR and len(out_shape) == 4:
        # planner.tflite's kind, with the upscale rounded up to an integer (the cost models
        # step by factors of 2: 2n-1 for 2n costs as 2); the TE reads clamp the source rows
        # (max / min), so the derived propagator takes whole H and W (safe, if coarse)
        return (
            Op.RESIZE,
            {
                "method": "bilinear",
                "scale": (-(-out_shape[1] // x_shape[1]), -(-out_shape[2] // x_shape[2])),
                "op": layer.kind.value,
            },
            None,
        )
    if layer is not None and layer.kind == Op.ARG_MAX:
        # its own Part kind (costed as Vela's operations), its working memory held in the
        # plan; the propagator, from the TE reads, takes the whole depth and maps the
        # output's other axes one to one
        work = arg_max_work_bytes(arg_max_piece_pixels(*arg_max_rows_cols(x_shape)),
                                  x_shape[-1])
        return Op.ARG_MAX, {WORK_ATTR: WorkMemory(work)}, None
    if layer is not None and layer.kind in DEPTH_REDUCTIONS and \
            3 in tuple(layer.attrs.get("axis") or ()):
        # its operator's own Part kind (costed as the stream runs it, planner.perf.ethos_u),
        # its working memory held in the plan; the propagator, from the TE reads, takes the
        # whole depth and the reduced height and width, the kept axes one to one
        axes = tuple(layer.attrs["axis"])
        work = reduce_over_depth_work_bytes(layer.kind, x_shape, axes, str(acts[0].dtype))
        return layer.kind, {"axis": axes, "activation": act,
                            **({WORK_ATTR: WorkMemory(work)} if work else {})}, None
    if layer is not None and layer.kind in _DATA_MOVEMENT_PARTS:
        kind, attrs = _DATA_MOVEMENT_PARTS[layer.kind](layer, x_shape, out_shape)
        return kind, attrs, None
    if layer is not None and layer.kind == Op.TRANSPOSE_CONV2D:
        return Op.CONV2D, _transpose_conv_attrs(layer, act), None
    if layer is not None and layer.kind == Op.BATCH_MATMUL:
        # its own Part kind, costed as the stream runs it (planner.perf.ethos_u); the
        # propagators (rows of a, columns of b, the whole reduced axis) come from the TE reads
        return Op.BATCH_MATMUL, {"adj_x": bool(layer.attrs.get("adj_x")),
                                 "adj_y": bool(layer.attrs.get("adj_y"))}, None
    weights = [x for x in ins if _name(x) in const_names and len(x.shape) >= 2]
    if reds:
        red = reds[-1]
        window = _window_of(r, amap, x_shape, out_shape)
        rk = _reduce_kind(red)
        kernel = mean_kernel(x_shape, layer.attrs.get("axis") or ()) \
            if layer is not None and not weights and (layer.kind == Op.MEAN or (
                layer.kind in _GLOBAL_REDUCTIONS
                and tuple(layer.attrs.get("axis") or ()) in ((1,), (2,)))) else None
        if kernel is not None:
            # the reduced extents of its NHWC view (ethos_arch.mean_window), as the stream
            # runs it (SUM, REDUCE_MAX, REDUCE_MIN over the height or the width alone: the
            # same window, ops_reduce); the propagator, from the TE reads, maps the kept axes
            # one to one
            return Op.MEAN, {"kernel": kernel, "keepdims": len(out_shape) == len(x_shape)}, None
        if len(x_shape) == 4 and len(out_shape) == 4 and window is not None and rk == "sum" \
                and weights:
            ch = amap.dims[3]
            oc = r.op.axis[3].var.name
            follows = ch is not None and ch.get(oc) != 0
            if follows:
                m = out_shape[3] // x_shape[3] if x_shape[3] else 1
                return Op.DEPTHWISE_CONV2D, dict(window, depth_multiplier=max(m, 1),
                                                activation=act), window
            groups = 1 if ch is not None and ch.get(oc) == 0 else (layer.attrs.get("groups", 1)
                                                                   if layer else 1)
            return Op.CONV2D, dict(window, groups=groups, activation=act), window
        if len(x_shape) == 4 and len(out_shape) == 4 and window is not None and not weights:
            # global (whole H and W) reductions with a 1x1 output are a mean unless the window
            # geometry says pool; te_ops' mean reads x[n, rh, rw, c] without an output row
            is_mean = layer is not None and layer.kind in _GLOBAL_REDUCTIONS
            if not is_mean:
                return Op.POOL, {"pool_type": "max" if rk == "max" else "avg",
                                "kernel": window["kernel"], "strides": window["strides"],
                                "padding": window["padding"], "activation": act}, window
        if not weights and len(x_shape) == 4:
            keep = len(out_shape) == 4
            return Op.MEAN, {"kernel": (x_shape[1], x_shape[2]), "keepdims": keep}, None
        if weights and rk == "sum":
            if len(x_shape) == 2 and len(out_shape) == 2:
                return Op.FULLY_CONNECTED, {"activation": act}, None
            # fully connected on NHWC tensors: a 1x1 convolution (as Vela runs it)
            if len(x_shape) == 4 and len(out_shape) == 4 and x_shape[1:3] == (1, 1) \
                    and out_shape[1:3] == (1, 1):
                w = {"kernel": (1, 1), "strides": (1, 1), "dilation": (1, 1),
                     "padding": (0, 0, 0, 0)}
                return Op.CONV2D, dict(w, groups=1, activation=act), w
        return Op.OPAQUE, {"op": layer.kind.value if layer else "reduce"}, None
    if layer is not None and layer.kind == Op.CONCATENATE:
        axis = layer.attrs.get("axis", -1) % len(out_shape)
        return Op.CONCATENATE, {"axis": axis, "activation": act}, None
    if len(acts) == 2:
        op = layer.kind.value if layer is not None and layer.kind.info.binary else "add"
        return Op.ELEMENTWISE, {"op": op, "activation": act}, None
    if all(m.affine for m in maps[:1]) and x_shape == out_shape and \
            (layer is None or layer.kind != Op.RESHAPE) and \
            amap.propagator([iv.var.name for iv in r.op.axis], x_shape) == \
            Propagator.identity(len(out_shape)):
        op = layer.kind.value if layer is not None else "copy"
        return Op.UNARY, {"op": op}, None
    if math.prod(x_shape) == math.prod(out_shape):
        if layer is not None and not layer.kind.info.data_move:
            # costed as a copy, but it computes (an operator with a constant operand whose
            # index map is not the identity): ``op`` names it, so it is never an alias
            return Op.RESHAPE, {"op": layer.kind.value}, None
        return Op.RESHAPE, {}, None
    return Op.OPAQUE, {"op": layer.kind.value if layer else "unknown"}, None
