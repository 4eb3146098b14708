"""Packaging for tvm-ethos: the TVM-agnostic cascading planner and the TVM extension."""
import re
from pathlib import Path

from setuptools import find_packages, setup

# one version, in tvm_ethos/_version.py (tvm_ethos.__version__, tvmc --version)
VERSION = re.search(r'__version__ = "([^"]+)"',
                    (Path(__file__).parent / "tvm_ethos" / "_version.py").read_text()).group(1)

setup(
    name="tvm-ethos",
    version=VERSION,
    description="Compile neural networks for Arm Ethos NPUs with TVM, with a GPU/CPU fallback",
    license="Apache-2.0",   # as Apache TVM
    classifiers=["License :: OSI Approved :: Apache Software License", "Typing :: Typed"],
    python_requires=">=3.10",
    packages=find_packages(include=["planner", "planner.*", "tvm_ethos", "tvm_ethos.*",
                                    "ethosu_stream", "ethosu_stream.*",
                                    "ethos_arch", "ethos_arch.*"]),
    # PEP 561: the type hints of the public API are for users' type checkers too
    package_data={"tvm_ethos": ["py.typed"], "planner": ["py.typed"]},
    install_requires=[
        "apache-tvm==0.27.0.post1",
        "numpy",
        "networkx",
        "tflite",
        "tqdm",
    ],
    extras_require={
        "test": ["onnx", "pytest", "hypothesis", "ai-edge-litert",
                 # make test's workers, one per core (-n, --dist loadfile: the Makefile)
                 "pytest-xdist>=3.5,<4",
                 # the ONNX QDQ oracle (tests/tvm_ethos/test_import_onnx_torch.py)
                 "onnxruntime",
                 # notebooks/ executed by tests/tvm_ethos/test_notebook.py
                 "nbclient", "nbformat", "ipykernel",
                 # tvmc plan --scheduler, tested on an in-process LocalCluster
                 "dask[distributed]",
                 # make lint (rules in ruff.toml)
                 "ruff"],
        "opencl": ["pyopencl[pocl]"],
        "vela": ["ethos-u-vela==5.2.0"],
        "plots": ["matplotlib"],
        # TFLite Micro's own interpreter: the reference for every Ethos-U / .tflite path and
        # the host that runs a .tflite's TFLite operators (wheels for CPython 3.11 and 3.12)
        "tflm": ["tflite-micro==0.dev20261023182759"],
        # load_model(torch module / ExportedProgram); pinned: the CPU build (a plain torch
        # resolves to a multi-GB CUDA build). Not in `make install`: once torch is installed,
        # tvm_ffi imports it on every `import tvm` (+2.8 s CPU, +255 MB per process here)
        "torch": ["torch==2.13.0"],
    },
    entry_points={
        "console_scripts": ["tvmc=tvm_ethos.cli:main"],
        # backends are plugins, built-in ones included (tvm_ethos/backends/registry.py)
        "tvm_ethos.backends": [
            "ethos-n = tvm_ethos.backends.ethos_n:plugin",
            "ethos-u = tvm_ethos.backends.ethos_u:plugin",
            "opencl = tvm_ethos.backends.opencl:plugin",
            "llvm = tvm_ethos.backends.llvm:plugin",
            "tflite-micro = tvm_ethos.backends.tflite_micro:plugin",
        ],
    },
)
