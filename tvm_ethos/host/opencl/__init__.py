"""OpenCL host kernels: GPU schedules, the TIR pipeline and the kernels' source extracted from
TVM's lowered modules for the executor to launch."""
