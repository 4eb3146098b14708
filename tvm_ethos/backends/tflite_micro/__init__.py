"""The ``tflite-micro`` host: operators the NPU does not take stay the TFLite operators they
were, for TFLite Micro's kernels (on a board; here its reference kernels run them in-process).

It is a host of another kind than ``llvm`` or ``opencl``: it builds nothing. A model compiled
for ``ethos-u,tflite-micro`` is the TFLite Micro ``.tflite`` itself (``compile.py`` partitions
the model on its TFLite graph, ``model.py`` runs and writes it), so it takes a ``.tflite``
model only and has no package form. ``ethos-u`` alone in a target list means
``ethos-u,tflite-micro`` (tvm_ethos/targets.py).
"""
from tvm_ethos.backends.base import (
    BACKEND_API_VERSION,
    Capabilities,
    HostBackend,
    HostOutput,
    LayerSupport,
    Plugin,
)

BACKEND_ID = "tflite-micro"


class TfliteMicroBackend(HostBackend):
    """The TFLite Micro host's whole contract: no options, no kernels, no codegen; its
    compile's output is the .tflite itself."""

    backend_id = BACKEND_ID

    def options_schema(self):
        return {}

    def codegen_factory(self):
        return None

    def host_output(self):
        return HostOutput.TFLITE

    def compile_model(self, mod, target, options: dict):
        # lazy: the TFLite graph compile loads the compile driver; the plugin loads on every
        # tvmc start (tvmc --help)
        from tvm_ethos.backends.tflite_micro.compile import compile_tflite

        return compile_tflite(mod, target, **options)

    def layer_support(self):
        # no Relax operator is built for it: what it runs never leaves the TFLite graph
        return LayerSupport({})

    def capabilities(self):
        return Capabilities(is_host=True)


plugin = Plugin(BACKEND_ID, BACKEND_API_VERSION, TfliteMicroBackend)
