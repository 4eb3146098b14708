"""Host kernels: the exact integer kernels scheduled for the CPU (``host.cpu``: llvm, the x86
instruction forms) and for OpenCL devices (``host.opencl``)."""
