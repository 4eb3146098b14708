"""Run a function right after a module's first import, or now where it is loaded already.

The NPU codegens (``relax.ext.<id>``) are global functions of ``tvm_ffi``, and only TVM looks
them up. ``import tvm_ethos`` promises them registered to whoever drives TVM afterwards, but a
``.tflite`` compile that never takes a TVM path should not pay for loading ``tvm_ffi`` (and what
it loads) only to register functions nobody calls. So ``tvm_ethos`` asks for the registration
when ``tvm_ffi`` is first imported, by the user's ``import tvm`` or by a path of ours that
needs TVM, whichever comes first, in either order of imports.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Callable


def after_import(name: str, then: Callable[[], object]) -> None:
    """Call ``then()`` once the top-level module ``name`` is imported: at once if it is in
    ``sys.modules``, else right after its first import has executed it."""
    if name in sys.modules:
        then()
        return
    sys.meta_path.insert(0, _AfterImportFinder(name, then))


class _AfterImportFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for ``name`` it takes the spec the other finders make and wraps
    its loader; it leaves ``sys.meta_path`` on first use, so one import is ever wrapped."""

    def __init__(self, name: str, then: Callable[[], object]):
        self.name, self.then = name, then

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)   # the other finders, in their order
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _ThenLoader(spec.loader, self.then)
        return spec


class _ThenLoader(importlib.abc.Loader):
    """The module's own loader, with ``then()`` after the module has executed."""

    def __init__(self, loader, then: Callable[[], object]):
        self._loader, self._then = loader, then

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        then, self._then = self._then, None   # once, should the module be executed again
        if then is not None:
            then()

    def __getattr__(self, attr):   # resource readers, get_data, is_package: the loader's own
        return getattr(self._loader, attr)
