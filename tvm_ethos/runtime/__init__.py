"""Runtime building blocks: allocators, fallback memory and edge steps, the OpenCL device.

Kept import-light on purpose (no tvm, no pyopencl at import): import the submodules you need,
``tvm_ethos.runtime.allocators``, ``.fallback_memory``, ``.opencl_device``.
"""
