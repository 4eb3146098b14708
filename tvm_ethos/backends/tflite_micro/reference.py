"""TFLite Micro's own interpreter on a source model (``tflite-micro``, the ``tflm`` extra):
the reference a compiled ``.tflite`` must equal, output for output."""
from __future__ import annotations

import numpy as np

from tvm_ethos.errors import TvmEthosError


class TflmReference:
    """One TFLite Micro interpreter on ``data`` (a model's bytes); state tensors carry over
    from one :meth:`run` to the next, as on a board."""

    def __init__(self, data: bytes):
        try:
            from tflite_micro.python.tflite_micro import runtime
        except ImportError:
            raise TvmEthosError("TFLite Micro's interpreter is not installed: pip install "
                                "'tvm-ethos[tflm]' (tflite-micro)") from None
        import tflite

        self._it = runtime.Interpreter.from_bytes(bytes(data))
        self._outputs = tflite.Model.GetRootAsModel(bytes(data), 0).Subgraphs(0).OutputsLength()

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        for i, x in enumerate(inputs):
            self._it.set_input(np.ascontiguousarray(x), i)
        self._it.invoke()
        return [np.array(self._it.get_output(i), copy=True) for i in range(self._outputs)]
