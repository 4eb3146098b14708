"""The runtime runs a cached package without TVM: importing its modules imports no tvm (nor
pyopencl, loaded on first use), so TVM stays a compile-time dependency (rfcs/0003). (Nor
``tvm_ffi``: the codegens register once it loads, tvm_ethos/after_import.py.)"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MODULES = ("opencl_device", "allocators", "fallback_memory", "options", "program", "cache",
           "executor")


@pytest.mark.parametrize("module", MODULES)
def test_runtime_module_imports_no_tvm(module):
    script = (f"import sys, tvm_ethos.runtime.{module}; "
              "print(sorted(m for m in ('tvm', 'pyopencl') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]", f"tvm_ethos.runtime.{module} imported {proc.stdout}"
