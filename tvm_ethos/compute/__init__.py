"""The shared TE compute definitions: every quantized operator's exact integer kernel as a TE
graph (``te_ops``, with TFLite's fixed-point arithmetic in ``quant`` and ``fixed_point``), and
a partitioned Relax function lowered to one such graph (``subgraph``). The NPU emulator and the
host kernels schedule what these define; nothing here schedules."""
