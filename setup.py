"""Packaging for tvm-ethos: the TVM-agnostic cascading planner and the TVM extension."""
from setuptools import find_packages, setup

setup(
    name="tvm-ethos",
    version="0.1.0",
    description="Compile neural networks for Arm Ethos NPUs with TVM, with a GPU/CPU fallback",
    python_requires=">=3.10",
    packages=find_packages(include=["planner", "planner.*", "tvm_ethos", "tvm_ethos.*"]),
    install_requires=[
        "apache-tvm==0.27.0.post1",
        "numpy",
        "networkx",
        "tflite",
        "tqdm",
    ],
    extras_require={
        "test": ["pytest", "hypothesis", "ai-edge-litert"],
        "opencl": ["pyopencl[pocl]"],
        "vela": ["ethos-u-vela==5.2.0"],
        "plots": ["matplotlib"],
    },
    entry_points={
        "console_scripts": ["tvmc=tvm_ethos.cli:main"],
    },
)
