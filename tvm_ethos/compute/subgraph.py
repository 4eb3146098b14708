"""Lower a partitioned Relax function (one NPU subgraph, or one host composite) to TE / TIR.

A subgraph function made by ``MergeCompositeFunctions`` is a chain of calls to local composite
functions. Each composite is re-read as a :class:`~tvm_ethos.patterns.QOp` and lowered with
``te_ops``; the whole chain becomes one TE graph and one PrimFunc whose parameters are

    [activation inputs..., constants (weights, bias, multipliers, shifts)..., outputs...]

``lower_function`` returns the *unscheduled* PrimFunc: the seam where a cascading scheduler
(``tvm_ethos.emulator.schedule``, later) applies a Proposal before the build.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import tvm
from tvm import relax, te

from tvm_ethos.compute.lowered import LoweredSubgraph
from tvm_ethos.compute.pad_fold import FOLD_INTO, fold_pad
from tvm_ethos.compute.te_ops import ConstPool, lower_qop
from tvm_ethos.errors import CompileError
from tvm_ethos.patterns import QOp, qop_from_composite

NPU_FUNC_ATTRS = {"op_pattern": 8, "tirx.is_scheduled": True}


def _te_placeholder(var: relax.Var, name: str):
    ty = var.ty
    shape = [int(v) for v in ty.shape.values]
    return te.placeholder(shape, dtype=str(ty.dtype), name=name)


def _composite_calls(body) -> dict:
    """Every binding of a subgraph's body that calls a local composite: var -> (QOp, args)."""
    funcs, calls = {}, {}
    for block in body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Function):
                funcs[b.var] = v
            elif isinstance(v, relax.Call) and isinstance(v.op, relax.Var) and v.op in funcs:
                cfunc = funcs[v.op]
                calls[b.var] = (cfunc, qop_from_composite(cfunc), list(v.args))
    return calls


def vars_read(expr) -> Iterator[relax.Var]:
    """Every Relax variable ``expr`` reads, in order, once per read (through calls, tuples and
    projections)."""
    if isinstance(expr, relax.Var):
        yield expr
    elif isinstance(expr, relax.Call):
        for a in expr.args:
            yield from vars_read(a)
    elif isinstance(expr, relax.Tuple):
        for f in expr.fields:
            yield from vars_read(f)
    elif isinstance(expr, relax.TupleGetItem):
        yield from vars_read(expr.tuple_value)


def _uses(body) -> Counter:
    """How many times each variable is read by the body's bindings and its result."""
    count: Counter = Counter()
    for block in body.blocks:
        for b in block.bindings:
            if not isinstance(b.value, relax.Function):
                count.update(vars_read(b.value))
    count.update(vars_read(body.body))
    return count


def _pad_folds(body) -> tuple[dict, set]:
    """The convolutions that take a PAD into their padding (``pad_fold``): convolution var ->
    (its QOp reading the PAD's input, the PAD's input expression), and the PADs' vars."""
    calls, uses = _composite_calls(body), _uses(body)
    out, pads = {}, set()
    for var, (cfunc, conv, args) in calls.items():
        if conv.kind not in FOLD_INTO or conv.problems:
            continue
        idx = next((k for k, cp in enumerate(cfunc.params) if cp.same_as(conv.inputs[0])), None)
        src = args[idx] if idx is not None else None
        if src not in calls or uses.get(src) != 1:
            continue
        pcfunc, pad, pargs = calls[src]
        pidx = next((k for k, cp in enumerate(pcfunc.params) if cp.same_as(pad.inputs[0])),
                    None)
        folded = fold_pad(pad, conv) if pidx is not None and not pad.problems else None
        if folded is not None:
            out[var] = (folded, pargs[pidx])
            pads.add(src)
    return out, pads


def lower_function(
    func: relax.Function, symbol: str, num_inputs: int | None = None, vnni: bool = False,
    avx2: bool = False, tflite_fc_rounding: bool = False, with_primfunc: bool = True,
    fold_pads: bool = False,
) -> LoweredSubgraph:
    """TE graph and unscheduled PrimFunc of one partitioned function (``vnni``: for an llvm
    host with AVX-512 VNNI; ``avx2``: with AVX2 and no VNNI; see ``te_ops.lower_qop``;
    ``tflite_fc_rounding``: FULLY_CONNECTED rounds as TFLite Micro's kernel does, what the
    function's NPU asks for in ``NpuBackend.emulator_lowering``; ``with_primfunc`` False:
    the TE graph only, for a compile that builds and schedules no TIR from it;
    ``fold_pads``: a PAD read only by a convolution that can pad for it is that
    convolution's padding, ``pad_fold``)."""
    params = list(func.params)
    if num_inputs is None:
        num_inputs = (
            int(func.attrs["tvm_ethos.num_inputs"])
            if func.attrs and "tvm_ethos.num_inputs" in func.attrs
            else len(params)
        )
    env: dict = {}
    in_phs = []
    for i, p in enumerate(params[:num_inputs]):
        ph = _te_placeholder(p, f"input{i}")
        env[p] = ph
        in_phs.append(ph)
    pool = ConstPool(prefix="c")
    layers: list[QOp] = []
    tensors = {}
    layer_inputs: list = []

    def apply_composite(cfunc: relax.Function, args, folded: tuple | None = None):
        op = qop_from_composite(cfunc)
        if op.problems:
            raise CompileError(f"cannot lower {op.kind}: {'; '.join(op.problems)}")
        name = f"l{len(layers)}_{op.kind}"
        ins = []
        for pos, inp in enumerate(op.inputs):
            if isinstance(inp, tvm.ir.expr.Constant):  # a constant operand (ADD / MUL by a tensor)
                value = inp.value.numpy()
                if value.ndim == 0 and op.out_shape:
                    # a scalar: the same broadcast as ones of the output's rank, which the
                    # planner's propagators and the stream's feature maps have axes for
                    value = value.reshape((1,) * len(op.out_shape))
                    op.in_shapes[pos] = value.shape
                ins.append(pool.add(f"{name}_in{pos}", value))
                continue
            if folded is not None and pos == 0:  # the PAD's input, the PAD in the padding
                ins.append(lookup(folded[1]))
                continue
            idx = next((k for k, cp in enumerate(cfunc.params) if cp.same_as(inp)), None)
            if idx is None:
                raise CompileError(f"{op.kind}: input is not a parameter of its composite")
            ins.append(lookup(args[idx]))
        if folded is not None:
            op = folded[0]
        out = lower_qop(op, ins, pool, name=name, vnni=vnni, avx2=avx2,
                        tfl_rounding=tflite_fc_rounding)
        layers.append(op)
        layer_inputs.append(list(ins))
        tensors[name] = out
        return out

    local_funcs: dict = {}

    def lookup(expr):
        if isinstance(expr, relax.Var) and expr in env:
            return env[expr]
        if isinstance(expr, relax.TupleGetItem):
            t = lookup(expr.tuple_value)
            return t[int(expr.index)]
        if isinstance(expr, relax.Tuple):
            return [lookup(f) for f in expr.fields]
        raise CompileError(f"unsupported expression in an NPU subgraph: {type(expr).__name__}")

    if func.attrs is not None and "Composite" in func.attrs:
        out = apply_composite(func, list(func.params[:num_inputs]))
        outputs = [out]
    else:
        body = func.body
        folds, skipped = _pad_folds(body) if fold_pads else ({}, set())
        for block in body.blocks:
            for b in block.bindings:
                v = b.value
                if isinstance(v, relax.Function):
                    local_funcs[b.var] = v
                elif b.var in skipped:
                    continue  # a PAD folded into the convolution that reads it
                elif (
                    isinstance(v, relax.Call)
                    and isinstance(v.op, relax.Var)
                    and v.op in local_funcs
                ):
                    env[b.var] = apply_composite(local_funcs[v.op], list(v.args),
                                                 folds.get(b.var))
                elif isinstance(v, relax.Call) and isinstance(v.op, relax.Function):
                    env[b.var] = apply_composite(v.op, list(v.args))
                elif isinstance(v, (relax.Tuple, relax.TupleGetItem, relax.Var)):
                    env[b.var] = lookup(v)
                else:
                    raise CompileError(f"unsupported binding in an NPU subgraph: {v}")
        res = lookup(body.body)
        outputs = res if isinstance(res, list) else [res]

    # every output must be its own stage (not an input, not repeated)
    final = []
    seen = set()
    for k, t in enumerate(outputs):
        if isinstance(t.op, te.PlaceholderOp) or id(t) in seen:
            src = t
            t = te.compute(src.shape, lambda *i, s=src: s[i], name=f"output{k}_copy")
        seen.add(id(t))
        final.append(t)
    const_phs = [ph for ph, _ in pool.items]
    prim = None
    if with_primfunc:
        prim = te.create_prim_func(in_phs + const_phs + final)
        prim = prim.with_attr("global_symbol", symbol)
        for k, v in NPU_FUNC_ATTRS.items():
            prim = prim.with_attr(k, v)
    return LoweredSubgraph(
        symbol=symbol,
        primfunc=prim,
        consts=[arr for _, arr in pool.items],
        num_inputs=num_inputs,
        layers=layers,
        tensors=tensors,
        outputs=final,
        input_tensors=in_phs,
        const_tensors=const_phs,
        layer_inputs=layer_inputs,
        state_consts=tuple(pool.states),
    )
