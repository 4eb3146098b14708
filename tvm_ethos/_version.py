"""The version of tvm-ethos: read by setup.py, ``tvm_ethos.__version__`` and ``tvmc --version``
without importing TVM."""
__version__ = "0.1.0"
