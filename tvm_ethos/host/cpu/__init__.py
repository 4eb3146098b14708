"""CPU (llvm) host kernels: schedules, the TIR pipeline, the x86 instruction forms (AVX-512
VNNI, AVX2, vector requantization) and the llvm target the code is built for."""
