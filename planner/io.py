"""A JSON format for PlannerGraphs, so the planner runs without TVM or TFLite.

Graphs come from TVM (part matchers), from TFLite (:mod:`planner.tflite`) or from a person
writing a test case; all three must be able to hand the planner the same thing, and a planned
graph must be reproducible from a file attached to a bug report. Two styles share one
document (the format is specified in ``docs/planner-graph-json.md``):

* the **full** form, which :func:`graph_to_json` and :func:`save_graph` write: every tensor with
  its shape, dtype, constness and compression, and every Part with its kind, inputs, output,
  propagators (augmented ``transform`` matrix and ``offset``) and attrs. It needs no
  knowledge of operators, so any PlannerGraph survives ``graph_from_json(graph_to_json(g))``
  unchanged;
* the **compact** "operator" form a human writes, ``{"op": "conv2d", "name": "c1", "input":
  "x", "out_channels": 16, "kernel": [3, 3], "padding": "same"}``, which calls the
  :mod:`planner.parts` constructors, so propagators are derived, never typed by hand.

Propagator entries are ints or exact fractions written ``"p/q"`` (as in
:meth:`planner.stripes.StripeConfig.to_json`); floats are refused there because they would
lose exactness. Every problem raises :class:`~planner.errors.PlannerError` naming the field
(``parts[3].propagators[0].offset[1]``) and the bad value.
"""
from __future__ import annotations

import json
import math
import numbers
import os
from fractions import Fraction
from typing import Any, Mapping, Sequence

from ethos_arch.ops import Op
from planner import parts as P
from planner.errors import PlannerError
from planner.graph import DTYPE_BYTES, Part, PlannerGraph, Tensor, part_kind
from planner.limits import check_part, check_tensor
from planner.propagator import Number, Propagator
from planner.work_memory import WORK_ATTR, WorkMemory

__all__ = ["FORMAT", "VERSION", "graph_to_json", "graph_from_json", "save_graph", "load_graph",
           "dumps", "loads", "COMPACT_OPS"]

FORMAT = "planner-graph"
VERSION = 1


# --------------------------------------------------------------------------------------------
# encoding
# --------------------------------------------------------------------------------------------
def _enc_number(x: Number, where: str) -> int | str:
    if isinstance(x, bool):
        raise PlannerError(f"{where}: expected a number, got {x!r}")
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, Fraction):
        return int(x) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"
    raise PlannerError(f"{where}: propagator entries must be ints or Fractions, got {x!r}")


def _enc_attr(v: Any, where: str) -> Any:
    """Attr values: None, bool, int, finite float, str, tuples of those, Fractions, and a
    Part's working memory (a :class:`~planner.work_memory.WorkMemory`)."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, WorkMemory):
        return {"work_memory": {f: _enc_attr(x, f"{where}.{f}") for f, x in v._asdict().items()}}
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, Fraction):
        return {"fraction": f"{v.numerator}/{v.denominator}"}
    if isinstance(v, numbers.Real):
        f = float(v)
        if not math.isfinite(f):
            raise PlannerError(f"{where}: JSON cannot hold the non-finite number {v!r}")
        return f
    if isinstance(v, (tuple, list)):
        return [_enc_attr(x, f"{where}[{i}]") for i, x in enumerate(v)]
    raise PlannerError(f"{where}: cannot write an attr of type {type(v).__name__} ({v!r}) "
                       "to JSON")


def _enc_tensor(t: Tensor) -> dict:
    return {"name": t.name, "shape": list(t.shape), "dtype": t.dtype,
            "constant": bool(t.is_constant), "compression": float(t.compression_ratio)}


def graph_to_json(g: PlannerGraph) -> dict:
    """The full form of ``g``: a dict of JSON types, deterministic for a given graph.

    Tensors are listed in order of first appearance (graph inputs, then each Part's inputs and
    output in Part order, then graph outputs); Parts, inputs and outputs keep the graph's
    order, which is part of its identity.
    """
    tensors: dict[str, dict] = {}

    def see(t: Tensor) -> str:
        if t.name not in tensors:
            tensors[t.name] = _enc_tensor(t)
        return t.name

    inputs = [see(t) for t in g.inputs]
    out_parts = []
    for i, p in enumerate(g.parts):
        where = f"parts[{i}] ({p.name!r})"
        keys = [k for k, _ in p.attrs]
        if len(set(keys)) != len(keys):
            raise PlannerError(f"{where}.attrs: repeated key in {keys}")
        if any(not isinstance(k, str) for k in keys):
            raise PlannerError(f"{where}.attrs: keys must be strings, got {keys}")
        out_parts.append({
            "name": p.name,
            "kind": p.kind,
            "inputs": [see(t) for t in p.inputs],
            "output": see(p.output),
            "propagators": [
                {"transform": [[_enc_number(x, f"{where}.propagators[{j}].transform")
                                for x in row] for row in prop.transform],
                 "offset": [_enc_number(x, f"{where}.propagators[{j}].offset")
                            for x in prop.offset],
                 **({"whole_axes": list(prop.whole_axes)} if prop.whole_axes else {})}
                for j, prop in enumerate(p.propagators)],
            "attrs": {k: _enc_attr(v, f"{where}.attrs.{k}") for k, v in p.attrs},
        })
    outputs = [see(t) for t in g.outputs]
    return {"format": FORMAT, "version": VERSION, "name": g.name,
            "tensors": list(tensors.values()), "inputs": inputs, "outputs": outputs,
            "parts": out_parts}


def _flat(v: Any) -> bool:
    """Scalars, lists of scalars, matrices, and objects of those fit on one line."""
    if isinstance(v, dict):
        return all(_flat(x) and not isinstance(x, dict) for x in v.values())
    if isinstance(v, list):
        return all(not isinstance(x, (dict, list)) or
                   (isinstance(x, list) and not any(isinstance(y, (dict, list)) for y in x))
                   for x in v)
    return True


def _dump(v: Any, indent: int, out: list[str]) -> None:
    """JSON with sorted keys, one line per tensor, propagator or small list (readable diffs)."""
    pad = "  " * indent
    if _flat(v):
        out.append(json.dumps(v, sort_keys=True, allow_nan=False))
    elif isinstance(v, dict):
        out.append("{\n")
        items = sorted(v.items())
        for n, (k, x) in enumerate(items):
            out.append(f"{pad}  {json.dumps(k)}: ")
            _dump(x, indent + 1, out)
            out.append(",\n" if n + 1 < len(items) else "\n")
        out.append(pad + "}")
    else:
        out.append("[\n")
        for n, x in enumerate(v):
            out.append(pad + "  ")
            _dump(x, indent + 1, out)
            out.append(",\n" if n + 1 < len(v) else "\n")
        out.append(pad + "]")


def dumps(g: PlannerGraph) -> str:
    """The full form as text: sorted keys, stable order, small lists on one line."""
    out: list[str] = []
    _dump(graph_to_json(g), 0, out)
    return "".join(out) + "\n"


def save_graph(g: PlannerGraph, path: str | os.PathLike) -> None:
    """Write ``g`` in the full form (byte-identical for equal graphs)."""
    text = dumps(g)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


# --------------------------------------------------------------------------------------------
# decoding helpers
# --------------------------------------------------------------------------------------------
def _show(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 80 else s[:77] + "..."


def _fail(where: str, what: str, value: Any) -> PlannerError:
    return PlannerError(f"{where}: {what}, got {_show(value)}")


def _obj(v: Any, where: str) -> Mapping:
    if not isinstance(v, Mapping):
        raise _fail(where, "expected an object", v)
    return v


def _list(v: Any, where: str) -> list:
    if not isinstance(v, (list, tuple)):
        raise _fail(where, "expected a list", v)
    return list(v)


def _str(v: Any, where: str) -> str:
    if not isinstance(v, str):
        raise _fail(where, "expected a string", v)
    return v


def _int(v: Any, where: str, lo: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise _fail(where, "expected an integer", v)
    if lo is not None and v < lo:
        raise _fail(where, f"expected an integer >= {lo}", v)
    return int(v)


def _bool(v: Any, where: str) -> bool:
    if not isinstance(v, bool):
        raise _fail(where, "expected true or false", v)
    return v


def _float(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
        raise _fail(where, "expected a finite number", v)
    return float(v)


def _ints(v: Any, where: str, lo: int | None = None, n: int | None = None) -> tuple[int, ...]:
    xs = _list(v, where)
    if n is not None and len(xs) != n:
        raise _fail(where, f"expected {n} integers", v)
    return tuple(_int(x, f"{where}[{i}]", lo) for i, x in enumerate(xs))


def _number(v: Any, where: str) -> Number:
    """A propagator entry: an int, or an exact fraction as a string ("1/2", "-3")."""
    if isinstance(v, bool):
        raise _fail(where, "expected an int or a 'p/q' string", v)
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, str):
        try:
            f = Fraction(v)
        except (ValueError, ZeroDivisionError):
            raise _fail(where, "expected an int or a 'p/q' string", v) from None
        return int(f) if f.denominator == 1 else f
    raise _fail(where, "expected an int or a 'p/q' string (floats are not exact)", v)


def _dec_attr(v: Any, where: str) -> Any:
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return _float(v, where)
    if isinstance(v, list):
        return tuple(_dec_attr(x, f"{where}[{i}]") for i, x in enumerate(v))
    if isinstance(v, Mapping) and set(v) == {"fraction"}:
        f = _number(v["fraction"], f"{where}.fraction")
        return Fraction(f)
    if isinstance(v, Mapping) and set(v) == {"work_memory"}:
        return _work_memory(v["work_memory"], f"{where}.work_memory")
    raise _fail(where, "expected null, a boolean, a number, a string, a list, "
                "{\"fraction\": \"p/q\"} or {\"work_memory\": {...}}", v)


def _work_memory(v: Any, where: str) -> WorkMemory:
    """A Part's working memory: ``fixed``, ``per_element`` and ``per_position`` bytes
    (default 0), ``align`` (default 1)."""
    d = _obj(v, where)
    _keys(d, where, WorkMemory._fields)
    return WorkMemory(_int(d.get("fixed", 0), f"{where}.fixed", 0),
                      _int(d.get("per_element", 0), f"{where}.per_element", 0),
                      _int(d.get("align", 1), f"{where}.align", 1),
                      _int(d.get("per_position", 0), f"{where}.per_position", 0))


def _keys(d: Mapping, where: str, allowed: Sequence[str], required: Sequence[str] = ()) -> None:
    for k in d:
        if k not in allowed and k != "comment":
            raise PlannerError(f"{where}: unknown field {k!r} (known: "
                               f"{', '.join(sorted(allowed))})")
    for k in required:
        if k not in d:
            raise PlannerError(f"{where}: missing field {k!r}")


def _dec_tensor(d: Any, where: str, constant_default: bool = False) -> Tensor:
    d = _obj(d, where)
    _keys(d, where, ("name", "shape", "dtype", "constant", "compression"), ("name", "shape"))
    name = _str(d["name"], f"{where}.name")
    shape = _ints(d["shape"], f"{where}.shape", lo=1)
    dtype = _str(d.get("dtype", "int8"), f"{where}.dtype")
    if dtype not in DTYPE_BYTES:
        raise _fail(f"{where}.dtype", f"expected one of {sorted(DTYPE_BYTES)}", dtype)
    constant = _bool(d.get("constant", constant_default), f"{where}.constant")
    comp = _float(d.get("compression", 1.0), f"{where}.compression")
    if not 0 < comp <= 1:
        raise _fail(f"{where}.compression", "expected a number in (0, 1]", d["compression"])
    return Tensor(name, shape, dtype, constant, comp)


# --------------------------------------------------------------------------------------------
# the compact operator form
# --------------------------------------------------------------------------------------------
class _Ctx:
    """State while reading one document: the tensor table and the parts built so far."""

    def __init__(self) -> None:
        self.tensors: dict[str, Tensor] = {}
        self.part_outputs: dict[str, Tensor] = {}

    def add_tensor(self, t: Tensor, where: str) -> None:
        old = self.tensors.get(t.name)
        if old is not None and old != t:
            raise PlannerError(f"{where}: tensor {t.name!r} is already defined differently "
                               f"({_tensor_text(old)} vs {_tensor_text(t)})")
        self.tensors[t.name] = t

    def ref(self, v: Any, where: str) -> Tensor:
        """A tensor by name, else a part's output by the part's name."""
        name = _str(v, where)
        if name in self.tensors:
            return self.tensors[name]
        if name in self.part_outputs:
            return self.part_outputs[name]
        raise _fail(where, "no tensor or earlier part has this name", name)


def _tensor_text(t: Tensor) -> str:
    return (f"shape {list(t.shape)} {t.dtype}{' constant' if t.is_constant else ''}"
            f"{'' if t.compression_ratio == 1 else f' compression {t.compression_ratio}'}")


def _padding(v: Any, where: str, x: Tensor, k: tuple[int, int], s: tuple[int, int],
             d: tuple[int, int]) -> tuple[int, ...]:
    """"same" (TFLite), "valid", one int, [vertical, horizontal] or [top, left, bottom, right]."""
    if isinstance(v, str):
        if v.lower() == "valid":
            return (0, 0, 0, 0)
        if v.lower() == "same":
            if len(x.shape) != 4:
                raise _fail(where, "'same' needs an NHWC input", list(x.shape))
            top, bottom = P.same_padding(x.shape[1], k[0], s[0], d[0])
            left, right = P.same_padding(x.shape[2], k[1], s[1], d[1])
            return (top, left, bottom, right)
        raise _fail(where, "expected 'same', 'valid' or integers", v)
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return (_int(v, where, 0),) * 4
    xs = _ints(v, where, 0)
    if len(xs) not in (2, 4):
        raise _fail(where, "expected 1, 2 or 4 integers", v)
    return xs if len(xs) == 4 else (xs[0], xs[1], xs[0], xs[1])


def _pair(v: Any, where: str) -> tuple[int, int]:
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return (_int(v, where, 1),) * 2
    return _ints(v, where, 1, 2)  # type: ignore[return-value]


def _activation(v: Any, where: str) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str) or v not in P.ACTIVATIONS:
        raise _fail(where, f"expected null or one of {[a for a in P.ACTIVATIONS if a]}", v)
    return v


def _compression(v: Any, where: str) -> float:
    c = _float(v, where)
    if not 0 < c <= 1:
        raise _fail(where, "expected a number in (0, 1]", v)
    return c


_UNARY_ALIASES = ("relu", "relu6", "relu_n1_to_1", "sigmoid", "tanh", "leaky_relu",
                  "hard_swish", "quantize")
_BINARY_ALIASES = ("add", "sub", "mul", "maximum", "minimum")


def _window(d: Mapping, where: str, x: Tensor, kernel_key: str, kernel_default) -> dict:
    k = _pair(d.get(kernel_key, kernel_default), f"{where}.{kernel_key}")
    s = _pair(d.get("strides", (1, 1)), f"{where}.strides")
    dil = _pair(d.get("dilation", (1, 1)), f"{where}.dilation")
    pads = _padding(d.get("padding", "valid"), f"{where}.padding", x, k, s, dil)
    return {"k": k, "s": s, "d": dil, "p": pads}


def _inline_or_ref(v: Any, where: str, ctx: _Ctx, part: str, j: int) -> Tensor:
    """An input: a name, or an inline constant {"shape": [...], "dtype": ...}."""
    if isinstance(v, Mapping):
        d = dict(v)
        d.setdefault("name", f"{part}:const{j}")
        t = _dec_tensor(d, where, constant_default=True)
        if not t.is_constant:
            raise _fail(f"{where}.constant", "an inline tensor must be a constant", False)
        ctx.add_tensor(t, where)
        return t
    return ctx.ref(v, where)


def _compact(d: Mapping, where: str, ctx: _Ctx) -> Part:
    op = _str(d["op"], f"{where}.op")
    if "name" not in d:
        raise PlannerError(f"{where}: missing field 'name'")
    name = _str(d["name"], f"{where}.name")
    where = f"{where} ({op} {name!r})"
    out = _str(d["output"], f"{where}.output") if d.get("output") is not None else None
    common = ("op", "name", "output")

    def x_in() -> Tensor:
        return ctx.ref(d["input"], f"{where}.input")

    if op == "conv2d":
        _keys(d, where, common + ("input", "out_channels", "kernel", "strides", "dilation",
                                  "padding", "groups", "activation", "weight_compression",
                                  "bias"), ("input", "out_channels"))
        x = x_in()
        w = _window(d, where, x, "kernel", (1, 1))
        return P.conv2d(name, x, _int(d["out_channels"], f"{where}.out_channels", 1),
                        kernel=w["k"], strides=w["s"], dilation=w["d"], padding=w["p"],
                        groups=_int(d.get("groups", 1), f"{where}.groups", 1),
                        activation=_activation(d.get("activation"), f"{where}.activation"),
                        weight_compression=_compression(d.get("weight_compression", 1.0),
                                                        f"{where}.weight_compression"),
                        bias=_bool(d.get("bias", True), f"{where}.bias"), output_name=out)
    if op == "depthwise_conv2d":
        _keys(d, where, common + ("input", "kernel", "strides", "dilation", "padding",
                                  "depth_multiplier", "activation", "weight_compression",
                                  "bias"), ("input",))
        x = x_in()
        w = _window(d, where, x, "kernel", (3, 3))
        return P.depthwise_conv2d(
            name, x, kernel=w["k"], strides=w["s"], dilation=w["d"], padding=w["p"],
            depth_multiplier=_int(d.get("depth_multiplier", 1), f"{where}.depth_multiplier", 1),
            activation=_activation(d.get("activation"), f"{where}.activation"),
            weight_compression=_compression(d.get("weight_compression", 1.0),
                                            f"{where}.weight_compression"),
            bias=_bool(d.get("bias", True), f"{where}.bias"), output_name=out)
    if op in ("pool", "max_pool", "avg_pool"):
        fields = common + ("input", "pool_size", "strides", "padding", "activation")
        _keys(d, where, fields + (("pool_type",) if op == "pool" else ()), ("input",))
        pool_type = op[:-5] if op != "pool" else _str(d.get("pool_type", "max"),
                                                        f"{where}.pool_type")
        if pool_type not in ("max", "avg"):
            raise _fail(f"{where}.pool_type", "expected 'max' or 'avg'", pool_type)
        x = x_in()
        w = _window(d, where, x, "pool_size", (2, 2))
        if "strides" not in d:
            w["s"] = w["k"]
            w["p"] = _padding(d.get("padding", "valid"), f"{where}.padding", x, w["k"], w["s"],
                              (1, 1))
        return P.pool2d(name, x, pool_type=pool_type, pool_size=w["k"], strides=w["s"],
                        padding=w["p"],
                        activation=_activation(d.get("activation"), f"{where}.activation"),
                        output_name=out)
    if op == "mean":
        _keys(d, where, common + ("input", "keepdims"), ("input",))
        return P.mean(name, x_in(), keepdims=_bool(d.get("keepdims", True), f"{where}.keepdims"),
                      output_name=out)
    if op == "elementwise" or op in _BINARY_ALIASES:
        extra = ("operation",) if op == "elementwise" else ()
        _keys(d, where, common + ("inputs", "activation") + extra,
              ("inputs",) + extra)
        operation = op if op != "elementwise" else _str(d["operation"], f"{where}.operation")
        ins = _list(d["inputs"], f"{where}.inputs")
        if len(ins) != 2:
            raise _fail(f"{where}.inputs", "expected two inputs", d["inputs"])
        a, b = (_inline_or_ref(v, f"{where}.inputs[{j}]", ctx, name, j)
                for j, v in enumerate(ins))
        return P.elementwise(name, a, b, op=operation,
                             activation=_activation(d.get("activation"), f"{where}.activation"),
                             output_name=out)
    if op == "unary" or op in _UNARY_ALIASES:
        extra = ("operation",) if op == "unary" else ()
        _keys(d, where, common + ("input",) + extra, ("input",) + extra)
        operation = op if op != "unary" else _str(d["operation"], f"{where}.operation")
        return P.unary(name, x_in(), op=operation, output_name=out)
    if op == "fully_connected":
        _keys(d, where, common + ("input", "units", "activation", "weight_compression", "bias"),
              ("input", "units"))
        return P.fully_connected(
            name, x_in(), _int(d["units"], f"{where}.units", 1),
            activation=_activation(d.get("activation"), f"{where}.activation"),
            weight_compression=_compression(d.get("weight_compression", 1.0),
                                            f"{where}.weight_compression"),
            bias=_bool(d.get("bias", True), f"{where}.bias"), output_name=out)
    if op == "concatenate":
        _keys(d, where, common + ("inputs", "axis"), ("inputs",))
        ins = [_inline_or_ref(v, f"{where}.inputs[{j}]", ctx, name, j)
               for j, v in enumerate(_list(d["inputs"], f"{where}.inputs"))]
        return P.concatenate(name, ins, axis=_int(d.get("axis", -1), f"{where}.axis"),
                             output_name=out)
    if op == "reshape":
        _keys(d, where, common + ("input", "shape"), ("input", "shape"))
        return P.reshape(name, x_in(), _ints(d["shape"], f"{where}.shape", 1), output_name=out)
    if op == "transpose":
        _keys(d, where, common + ("input", "perm"), ("input", "perm"))
        return P.transpose(name, x_in(), _ints(d["perm"], f"{where}.perm", 0), output_name=out)
    if op == "resize":
        _keys(d, where, common + ("input", "scale", "method"), ("input",))
        method = _str(d.get("method", "nearest"), f"{where}.method")
        if method not in ("nearest", "bilinear"):
            raise _fail(f"{where}.method", "expected 'nearest' or 'bilinear'", method)
        return P.resize(name, x_in(), scale=_pair(d.get("scale", 2), f"{where}.scale"),
                        method=method, output_name=out)
    if op == "pad":
        _keys(d, where, common + ("input", "pads"), ("input", "pads"))
        pads = [_ints(v, f"{where}.pads[{i}]", 0, 2)
                for i, v in enumerate(_list(d["pads"], f"{where}.pads"))]
        return P.pad(name, x_in(), pads, output_name=out)
    if op in ("slice", "strided_slice"):
        _keys(d, where, common + ("input", "begin", "size"), ("input", "begin", "size"))
        return P.strided_slice(name, x_in(), _ints(d["begin"], f"{where}.begin", 0),
                               _ints(d["size"], f"{where}.size", 1), output_name=out)
    if op == "softmax":
        _keys(d, where, common + ("input", "beta"), ("input",))
        x = x_in()
        return P.opaque(name, Op.SOFTMAX, x, x.shape, output_name=out,
                        beta=_float(d.get("beta", 1.0), f"{where}.beta"))
    if op == "opaque":
        _keys(d, where, common + ("input", "kind", "out_shape", "attrs"),
              ("input", "kind", "out_shape"))
        attrs = _obj(d.get("attrs", {}), f"{where}.attrs")
        decoded = {k: _dec_attr(v, f"{where}.attrs.{k}") for k, v in attrs.items()}
        _check_work(decoded, f"{where}.attrs", attrs)
        return P.opaque(name, part_kind(_str(d["kind"], f"{where}.kind")), x_in(),
                        _ints(d["out_shape"], f"{where}.out_shape", 1), output_name=out,
                        **decoded)
    raise _fail(f"{where}.op", f"unknown operator (known: {', '.join(COMPACT_OPS)})", op)


#: Operator names the compact form accepts in ``"op"``.
COMPACT_OPS: tuple[str, ...] = tuple(sorted(
    ("conv2d", "depthwise_conv2d", "pool", "max_pool", "avg_pool", "mean", "elementwise",
     "unary", "fully_connected", "concatenate", "reshape", "transpose", "resize", "pad",
     "slice", "strided_slice", "softmax", "opaque") + _UNARY_ALIASES + _BINARY_ALIASES))


# --------------------------------------------------------------------------------------------
# decoding
# --------------------------------------------------------------------------------------------
def _full_part(d: Mapping, where: str, ctx: _Ctx) -> Part:
    _keys(d, where, ("name", "kind", "inputs", "output", "propagators", "attrs"),
          ("name", "kind", "inputs", "output", "propagators"))
    name = _str(d["name"], f"{where}.name")
    where = f"{where} ({name!r})"
    kind = part_kind(_str(d["kind"], f"{where}.kind"))

    def known(v: Any, w: str) -> Tensor:
        n = _str(v, w)
        if n not in ctx.tensors:
            raise _fail(w, "not in the tensors table", n)
        return ctx.tensors[n]

    inputs = tuple(known(v, f"{where}.inputs[{i}]")
                   for i, v in enumerate(_list(d["inputs"], f"{where}.inputs")))
    output = known(d["output"], f"{where}.output")
    props = []
    for j, pd in enumerate(_list(d["propagators"], f"{where}.propagators")):
        w = f"{where}.propagators[{j}]"
        pd = _obj(pd, w)
        _keys(pd, w, ("transform", "offset", "whole_axes"), ("transform", "offset"))
        rows = _list(pd["transform"], f"{w}.transform")
        transform = tuple(tuple(_number(x, f"{w}.transform[{r}][{c}]")
                                for c, x in enumerate(_list(row, f"{w}.transform[{r}]")))
                          for r, row in enumerate(rows))
        offset = tuple(_number(x, f"{w}.offset[{i}]")
                       for i, x in enumerate(_list(pd["offset"], f"{w}.offset")))
        whole = tuple(_int(x, f"{w}.whole_axes[{i}]")
                      for i, x in enumerate(_list(pd.get("whole_axes", []), f"{w}.whole_axes")))
        try:
            props.append(Propagator(transform, offset, whole))
        except ValueError as e:
            raise _fail(w, str(e), {"transform": pd["transform"], "offset": pd["offset"]}) \
                from None
    attrs = _obj(d.get("attrs", {}), f"{where}.attrs")
    attr_t = tuple(sorted((_str(k, f"{where}.attrs"), _dec_attr(v, f"{where}.attrs.{k}"))
                          for k, v in attrs.items()))
    _check_work(dict(attr_t), f"{where}.attrs", attrs)
    return Part(name, kind, inputs, output, tuple(props), attr_t)


def _check_work(attrs: Mapping, where: str, raw: Mapping) -> None:
    """A Part's working memory is its ``work`` attr, a ``{"work_memory": {...}}`` object (a
    plain list would read back as a tuple the planner cannot size)."""
    if "work_bytes" in attrs:
        raise _fail(f"{where}.work_bytes", "a Part's working memory is the attr \"work\": "
                    "write {\"work_memory\": {\"fixed\": BYTES}} there", raw["work_bytes"])
    if attrs.get(WORK_ATTR) is not None and not isinstance(attrs[WORK_ATTR], WorkMemory):
        raise _fail(f"{where}.{WORK_ATTR}", "expected {\"work_memory\": {\"fixed\": BYTES, "
                    "\"per_element\": BYTES, \"align\": BYTES}}", raw[WORK_ATTR])


def graph_from_json(d: Mapping[str, Any]) -> PlannerGraph:
    """Build a PlannerGraph from either form (or a mix: parts are read in order).

    Raises:
        PlannerError: naming the offending field and value.
    """
    d = _obj(d, "graph")
    _keys(d, "graph", ("format", "version", "name", "tensors", "inputs", "outputs", "parts"),
          ("parts",))
    if "format" in d and d["format"] != FORMAT:
        raise _fail("format", f"expected {FORMAT!r}", d["format"])
    if "version" in d and d["version"] != VERSION:
        raise _fail("version", f"expected {VERSION} (the only version this planner reads)",
                    d["version"])
    name = _str(d.get("name", "graph"), "name")
    ctx = _Ctx()
    for i, td in enumerate(_list(d.get("tensors", []), "tensors")):
        ctx.add_tensor(_dec_tensor(td, f"tensors[{i}]"), f"tensors[{i}]")
    inputs = []
    for i, v in enumerate(_list(d.get("inputs", []), "inputs")):
        if isinstance(v, str):
            inputs.append(ctx.ref(v, f"inputs[{i}]"))
        else:
            t = _dec_tensor(v, f"inputs[{i}]")
            if t.is_constant:
                raise _fail(f"inputs[{i}].constant", "a graph input cannot be constant", True)
            check_tensor(t, f"inputs[{i}]")
            ctx.add_tensor(t, f"inputs[{i}]")
            inputs.append(t)
    built: list[Part] = []
    for i, pd in enumerate(_list(d["parts"], "parts")):
        where = f"parts[{i}]"
        pd = _obj(pd, where)
        if "op" not in pd and "kind" not in pd:
            raise PlannerError(f"{where}: missing field 'op' (compact form) or 'kind' "
                               "(full form)")
        try:
            part = _compact(pd, where, ctx) if "op" in pd else _full_part(pd, where, ctx)
            check_part(part)    # sizes and windows within the planner's limits
        except PlannerError as e:
            msg = str(e)
            if not msg.startswith(where):
                label = pd.get("name") if isinstance(pd.get("name"), str) else "?"
                msg = f"{where} ({label!r}): {msg}"
            raise PlannerError(msg) from None
        for j, t in enumerate(part.inputs):
            ctx.add_tensor(t, f"{where}.inputs[{j}]")
        ctx.add_tensor(part.output, f"{where}.output")
        if part.name in ctx.part_outputs:
            raise _fail(f"{where}.name", "two parts have this name", part.name)
        ctx.part_outputs[part.name] = part.output
        built.append(part)
    if "outputs" in d:
        outputs = [ctx.ref(v, f"outputs[{i}]")
                   for i, v in enumerate(_list(d["outputs"], "outputs"))]
    else:
        consumed = {t.name for p in built for t in p.inputs}
        outputs = [p.output for p in built if p.output.name not in consumed]
    return PlannerGraph(tuple(built), tuple(inputs), tuple(outputs), name)


def loads(text: str) -> PlannerGraph:
    """Parse JSON text in either form."""
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise PlannerError(f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") \
            from None
    return graph_from_json(d)


def load_graph(path: str | os.PathLike) -> PlannerGraph:
    """Read a graph file in either form."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise PlannerError(f"cannot read graph file {os.fspath(path)!r}: {e.strerror}") \
            from None
    except UnicodeDecodeError:
        raise PlannerError(f"{os.fspath(path)}: not a UTF-8 text file") from None
    try:
        return loads(text)
    except PlannerError as e:
        raise PlannerError(f"{os.fspath(path)}: {e}") from None
