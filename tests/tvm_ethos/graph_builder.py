"""Small int8 TFLite graphs with several operators (for the executor's fallback scenarios).

``tflite_builder`` makes one-operator models; this makes a graph: ``g = Graph(rs)``,
``x = g.input((1, 8, 8, 4))``, ``a = g.conv2d(x, 6)``, ``g.add(a, b)``, ... ``g.build([y])``.
Quantization parameters are random but sane (as in tflite_builder), weights random int8.
"""
from __future__ import annotations

import numpy as np
import tflite
from tflite_builder import ACT, BO, BOPT, T, serialize


class Graph:
    def __init__(self, rs: np.random.RandomState):
        self.rs = rs
        self.tensors: list[T] = []
        self.inputs: list[int] = []
        self.ops: list[tuple] = []  # (opcode, options_type, options_fn, inputs, outputs)

    # ---- tensors
    def _add(self, t: T) -> int:
        self.tensors.append(t)
        return len(self.tensors) - 1

    def _act(self, shape) -> int:
        rs = self.rs
        return self._add(
            T(list(shape), "int8", scale=rs.uniform(0.02, 0.1), zp=int(rs.randint(-20, 20)))
        )

    def shape(self, t: int) -> tuple:
        return tuple(self.tensors[t].shape)

    def input(self, shape) -> int:
        t = self._act(shape)
        self.inputs.append(t)
        return t

    # ---- operators
    def conv2d(
        self, x, cout, kernel=(3, 3), stride=(1, 1), padding="SAME", act=None, depthwise=False
    ):
        rs = self.rs
        n, h, w, cin = self.shape(x)
        xs = self.tensors[x].scale[0]
        if depthwise:
            cout = cin
            wshape, qaxis = [1, kernel[0], kernel[1], cout], 3
        else:
            wshape, qaxis = [cout, kernel[0], kernel[1], cin], 0
        wsc = rs.uniform(0.002, 0.02, size=cout).astype(np.float32)
        wt = self._add(T(wshape, "int8", scale=wsc, zp=np.zeros(cout, np.int64),
                         data=rs.randint(-127, 128, size=wshape).astype(np.int8), axis=qaxis))
        bias = self._add(
            T(
                [cout],
                "int32",
                scale=(xs * wsc).astype(np.float32),
                zp=np.zeros(cout, np.int64),
                data=rs.randint(-2000, 2000, size=cout).astype(np.int32),
            )
        )
        if padding == "SAME":
            oh, ow = -(-h // stride[0]), -(-w // stride[1])
        else:
            oh, ow = (h - kernel[0]) // stride[0] + 1, (w - kernel[1]) // stride[1] + 1
        y = self._act((n, oh, ow, cout))
        pad = tflite.Padding.SAME if padding == "SAME" else tflite.Padding.VALID

        def opts(b):
            if depthwise:
                tflite.DepthwiseConv2DOptionsStart(b)
                tflite.DepthwiseConv2DOptionsAddPadding(b, pad)
                tflite.DepthwiseConv2DOptionsAddStrideW(b, stride[1])
                tflite.DepthwiseConv2DOptionsAddStrideH(b, stride[0])
                tflite.DepthwiseConv2DOptionsAddDepthMultiplier(b, 1)
                tflite.DepthwiseConv2DOptionsAddFusedActivationFunction(b, ACT[act])
                return tflite.DepthwiseConv2DOptionsEnd(b)
            tflite.Conv2DOptionsStart(b)
            tflite.Conv2DOptionsAddPadding(b, pad)
            tflite.Conv2DOptionsAddStrideW(b, stride[1])
            tflite.Conv2DOptionsAddStrideH(b, stride[0])
            tflite.Conv2DOptionsAddFusedActivationFunction(b, ACT[act])
            return tflite.Conv2DOptionsEnd(b)

        op = BO.DEPTHWISE_CONV_2D if depthwise else BO.CONV_2D
        ot = BOPT.DepthwiseConv2DOptions if depthwise else BOPT.Conv2DOptions
        self.ops.append((op, ot, opts, [x, wt, bias], [y]))
        return y

    def binary(self, kind, a, b, act=None):
        out_shape = tuple(np.broadcast_shapes(self.shape(a), self.shape(b)))
        y = self._act(out_shape)

        def opts(bd):
            if kind == "add":
                tflite.AddOptionsStart(bd)
                tflite.AddOptionsAddFusedActivationFunction(bd, ACT[act])
                return tflite.AddOptionsEnd(bd)
            tflite.MulOptionsStart(bd)
            tflite.MulOptionsAddFusedActivationFunction(bd, ACT[act])
            return tflite.MulOptionsEnd(bd)

        self.ops.append(
            (
                BO.ADD if kind == "add" else BO.MUL,
                BOPT.AddOptions if kind == "add" else BOPT.MulOptions,
                opts,
                [a, b],
                [y],
            )
        )
        return y

    def add(self, a, b, act=None):
        return self.binary("add", a, b, act)

    def pool(self, kind, x, size=(2, 2), stride=(2, 2), padding="VALID"):
        n, h, w, c = self.shape(x)
        if padding == "SAME":
            oh, ow = -(-h // stride[0]), -(-w // stride[1])
        else:
            oh, ow = (h - size[0]) // stride[0] + 1, (w - size[1]) // stride[1] + 1
        src = self.tensors[x]
        y = self._add(T([n, oh, ow, c], "int8", scale=src.scale, zp=src.zp))
        pad = tflite.Padding.SAME if padding == "SAME" else tflite.Padding.VALID

        def opts(b):
            tflite.Pool2DOptionsStart(b)
            tflite.Pool2DOptionsAddPadding(b, pad)
            tflite.Pool2DOptionsAddStrideW(b, stride[1])
            tflite.Pool2DOptionsAddStrideH(b, stride[0])
            tflite.Pool2DOptionsAddFilterWidth(b, size[1])
            tflite.Pool2DOptionsAddFilterHeight(b, size[0])
            tflite.Pool2DOptionsAddFusedActivationFunction(b, 0)
            return tflite.Pool2DOptionsEnd(b)

        self.ops.append(
            (
                BO.AVERAGE_POOL_2D if kind == "avg" else BO.MAX_POOL_2D,
                BOPT.Pool2DOptions,
                opts,
                [x],
                [y],
            )
        )
        return y

    def mean(self, x):
        n, h, w, c = self.shape(x)
        axis = self._add(T([2], "int32", data=np.array([1, 2], np.int32)))
        y = self._act((n, 1, 1, c))

        def opts(b):
            tflite.ReducerOptionsStart(b)
            tflite.ReducerOptionsAddKeepDims(b, True)
            return tflite.ReducerOptionsEnd(b)

        self.ops.append((BO.MEAN, BOPT.ReducerOptions, opts, [x, axis], [y]))
        return y

    # ---- flatbuffer
    def build(self, outputs) -> bytes:
        return serialize(self.tensors, self.ops, self.inputs, list(outputs),
                         "tvm-ethos graph test")
