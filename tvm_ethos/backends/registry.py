"""Backend registry keyed by backend id, with pluggable (third-party) backends.

Rules (seed 002, Arm NN's backend guide, applied to Python):

* A backend is registered as ``backend id -> factory``; the backend object is created only when
  needed (``get``). Ids are unique: an id that is already registered is skipped, with a log.
* A plugin exposes three callables, the Python form of the dynamic-backend interface:
  ``get_backend_id() -> str``, ``get_version() -> (major, minor)`` (the Backend API version it
  was written against) and ``backend_factory() -> Backend``.
* Version rule: a plugin loads only if its major equals the host's
  (:data:`~tvm_ethos.backends.base.BACKEND_API_VERSION`) and its minor is not newer than the
  host's minor. 2.1 loads on 2.4; 2.5 does not load on 2.4; 2.0 does not load on 1.0 or 3.0.
* Backend id validity: a non-empty string. Because ids double as target names in
  ``"ethos-n,llvm"``, they may hold ASCII letters, digits and ``-`` only (no ``,``, spaces or dots).
* Plugins come from Python entry points of group ``tvm_ethos.backends`` (the built-in ethos-n,
  ethos-u, opencl and llvm included) and then from the directories listed in the environment
  variable ``TVM_ETHOS_BACKEND_PATH`` (``:``-separated, absolute, existing directories; others are
  logged and ignored). In those directories only files named
  ``<vendor>_<name>_backend.py`` with an optional ``.<digits>`` version chain
  (``Acme_Npu_backend.py.1.2``) are loaded; ``<vendor>`` and ``<name>`` are alphanumeric.
  Symlinks are followed; a file reached twice (same canonical path) loads once.
* The process-wide registry (:func:`get_registry`) registers the built-in backends at once and
  looks for plugins (entry points, then ``TVM_ETHOS_BACKEND_PATH``) only when asked for every
  backend (``ids``) or for one that is not registered: a command that names built-in targets
  only does not read every installed distribution's entry points. A built-in id wins over a
  plugin's, as it does when both come from the scan.
* A rejected plugin is logged with the reason (logger ``tvm_ethos.backends``), recorded in
  ``BackendRegistry.rejected``, and never registered: its factory is never called.
"""
from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import re
import sys
from dataclasses import dataclass
from typing import Callable

from tvm_ethos.backends.base import BACKEND_API_VERSION, Backend
from tvm_ethos.errors import BackendError

log = logging.getLogger("tvm_ethos.backends")

ENTRY_POINT_GROUP = "tvm_ethos.backends"
PATH_ENV = "TVM_ETHOS_BACKEND_PATH"

#: The built-in backends, as setup.py declares them in ``entry_points``, in the order the
#: installed metadata lists them (by name), which is the order ``ids`` gives them in; loaded
#: through the entry-point loader without reading the installed metadata.
BUILTIN_ENTRY_POINTS = {
    "ethos-n": "tvm_ethos.backends.ethos_n:plugin",
    "ethos-u": "tvm_ethos.backends.ethos_u:plugin",
    "llvm": "tvm_ethos.backends.llvm:plugin",
    "opencl": "tvm_ethos.backends.opencl:plugin",
    "tflite-micro": "tvm_ethos.backends.tflite_micro:plugin",
}

_ID_RE = re.compile(r"^[A-Za-z0-9-]+$")
_FILE_RE = re.compile(r"^([A-Za-z0-9]+)_([A-Za-z0-9]+)_backend\.py((\.[0-9]+)*)$")


@dataclass
class Rejection:
    source: str
    backend_id: str | None
    reason: str


@dataclass
class _Entry:
    backend_id: str
    factory: Callable[[], Backend]
    version: tuple
    source: str


def is_valid_backend_id(backend_id) -> bool:
    return isinstance(backend_id, str) and bool(_ID_RE.match(backend_id))


def is_compatible_version(backend_version, host_version=BACKEND_API_VERSION) -> bool:
    """Same major, backend minor not newer than the host minor."""
    major, minor = backend_version
    hmajor, hminor = host_version
    return major == hmajor and minor <= hminor


def is_valid_backend_file_name(name: str) -> bool:
    return bool(_FILE_RE.match(name))


def _parse_version(v):
    if isinstance(v, str):
        parts = v.split(".")
        if len(parts) != 2:
            raise ValueError(f"version {v!r} is not 'major.minor'")
        v = tuple(parts)
    if not isinstance(v, (tuple, list)) or len(v) != 2:
        raise ValueError(f"version {v!r} is not a (major, minor) pair")
    major, minor = (int(x) for x in v)
    if major < 0 or minor < 0:
        raise ValueError(f"version {v!r} has a negative field")
    return (major, minor)


class BackendRegistry:
    def __init__(self, host_version=BACKEND_API_VERSION):
        self.host_version = tuple(host_version)
        self._entries: dict[str, _Entry] = {}
        self.rejected: list[Rejection] = []
        self._loaded_files: set[str] = set()
        #: plugins not looked for yet (:func:`get_registry`'s registry): done on first need
        self._plugins_pending = False

    # ------------------------------------------------------------ registration
    def register(self, backend_id, factory, version=None, source: str = "api") -> bool:
        """Register ``factory`` under ``backend_id``; returns False (logged) when rejected."""
        version = self.host_version if version is None else version
        try:
            version = _parse_version(version)
        except (TypeError, ValueError) as err:
            return self._reject(source, backend_id, f"invalid version: {err}")
        if not is_valid_backend_id(backend_id):
            return self._reject(
                source,
                backend_id,
                f"invalid backend id {backend_id!r}: must be a non-empty string of letters, "
                "digits and '-'",
            )
        if not is_compatible_version(version, self.host_version):
            return self._reject(
                source, backend_id,
                f"backend API version {version[0]}.{version[1]} is not compatible with the host's "
                f"{self.host_version[0]}.{self.host_version[1]} (same major and a minor no newer "
                "than the host's are required)",
            )
        if backend_id in self._entries:
            return self._reject(
                source,
                backend_id,
                f"backend id {backend_id!r} is already registered (by "
                f"{self._entries[backend_id].source})",
            )
        if not callable(factory):
            return self._reject(source, backend_id, "the backend factory is not callable")
        self._entries[backend_id] = _Entry(backend_id, factory, version, source)
        log.debug("registered backend %s (API %d.%d) from %s", backend_id, *version, source)
        return True

    def deregister(self, backend_id: str):
        self._entries.pop(backend_id, None)

    def _reject(self, source, backend_id, reason) -> bool:
        self.rejected.append(
            Rejection(source, backend_id if isinstance(backend_id, str) else None, reason)
        )
        log.warning("backend %r from %s rejected: %s", backend_id, source, reason)
        return False

    # ------------------------------------------------------------ queries
    def ids(self) -> list[str]:
        """Every registered backend id, plugins included."""
        self._load_pending_plugins()
        return list(self._entries)

    def known_ids(self) -> list[str]:
        """The ids registered so far, without looking for plugins not looked for yet (the
        built-in backends, at least)."""
        return list(self._entries)

    def is_registered(self, backend_id: str) -> bool:
        if backend_id not in self._entries:
            self._load_pending_plugins()
        return backend_id in self._entries

    def source_of(self, backend_id: str) -> str:
        return self._entries[backend_id].source

    def get(self, backend_id: str) -> Backend:
        """Create the backend object (a light factory product, as in Arm NN)."""
        if backend_id not in self._entries:
            self._load_pending_plugins()
        try:
            entry = self._entries[backend_id]
        except KeyError:
            raise BackendError(
                f"no backend {backend_id!r} is registered; registered backends: "
                f"{', '.join(sorted(self._entries))}"
            ) from None
        backend = entry.factory()
        if not isinstance(backend, Backend):
            raise BackendError(
                f"the factory of backend {backend_id!r} returned {type(backend).__name__}, "
                "not a Backend"
            )
        return backend

    # ------------------------------------------------------------ plugins
    def register_plugin(self, plugin, source: str, expected_id: str | None = None) -> bool:
        """Register a plugin object exposing get_backend_id / get_version / backend_factory."""
        for attr in ("get_backend_id", "get_version", "backend_factory"):
            if not callable(getattr(plugin, attr, None)):
                return self._reject(source, expected_id, f"the plugin has no callable {attr}()")
        try:
            backend_id = plugin.get_backend_id()
        except Exception as err:
            return self._reject(
                source, expected_id, f"get_backend_id() raised {type(err).__name__}: {err}"
            )
        if expected_id is not None and backend_id != expected_id:
            return self._reject(
                source,
                backend_id,
                f"the entry point is named {expected_id!r} but the plugin's backend id is "
                f"{backend_id!r}",
            )
        try:
            version = _parse_version(plugin.get_version())
        except Exception as err:
            return self._reject(source, backend_id, f"get_version() is not usable: {err}")
        factory = plugin.backend_factory

        def checked_factory(factory=factory, backend_id=backend_id):
            backend = factory()
            if not isinstance(backend, Backend):
                raise BackendError(
                    f"backend_factory() of {backend_id!r} returned {type(backend).__name__}, "
                    "not a Backend"
                )
            if backend.backend_id != backend_id:
                raise BackendError(
                    f"backend_factory() of {backend_id!r} made a backend with id "
                    f"{backend.backend_id!r}"
                )
            return backend

        return self.register(backend_id, checked_factory, version=version, source=source)

    def load_entry_points(self):
        from importlib import metadata

        seen = set()
        try:
            eps = metadata.entry_points(group=ENTRY_POINT_GROUP)
        except Exception as err:  # pragma: no cover
            log.warning("cannot read entry points of group %s: %s", ENTRY_POINT_GROUP, err)
            eps = []
        specs = [(ep.name, ep.value, f"entry point {ep.name} = {ep.value}") for ep in eps]
        for name, value in BUILTIN_ENTRY_POINTS.items():
            if not any(s[0] == name and s[1] == value for s in specs):
                specs.insert(0, (name, value, f"built-in {name} = {value}"))
        for name, value, source in specs:
            if (name, value) in seen:
                continue
            seen.add((name, value))
            self._load_entry(name, value, source)

    def load_builtins(self):
        """The built-in backends (:data:`BUILTIN_ENTRY_POINTS`), without reading the installed
        metadata."""
        for name, value in BUILTIN_ENTRY_POINTS.items():
            self._load_entry(name, value, f"built-in {name} = {value}")

    def _load_entry(self, name: str, value: str, source: str) -> None:
        """Import the plugin object ``value`` (``module:attr``) and register it as ``name``."""
        if name in self._entries and self.source_of(name).endswith(value):
            return
        try:
            mod_name, _, obj_path = value.partition(":")
            obj = importlib.import_module(mod_name)
            for part in filter(None, obj_path.split(".")):
                obj = getattr(obj, part)
        except Exception as err:
            self._reject(source, name, f"cannot import {value}: {type(err).__name__}: {err}")
            return
        self.register_plugin(obj, source=source, expected_id=name)

    def load_path(self, path_list: str | None = None):
        if path_list is None:
            path_list = os.environ.get(PATH_ENV, "")
        for directory in [p for p in path_list.split(os.pathsep) if p]:
            if not os.path.isabs(directory):
                log.warning("%s entry %r ignored: not an absolute path", PATH_ENV, directory)
                continue
            if not os.path.exists(directory):
                log.warning("%s entry %r ignored: does not exist", PATH_ENV, directory)
                continue
            if not os.path.isdir(directory):
                log.warning("%s entry %r ignored: not a directory", PATH_ENV, directory)
                continue
            for fname in sorted(os.listdir(directory)):
                full = os.path.join(directory, fname)
                if not is_valid_backend_file_name(fname):
                    if fname.endswith(".py") or "_backend" in fname:
                        self._reject(
                            full,
                            None,
                            f"file name {fname!r} does not follow "
                            "<vendor>_<name>_backend.py[.<version>]",
                        )
                    continue
                if not os.path.exists(full):  # dangling symlink
                    self._reject(full, None, "symlink resolves to a file that does not exist")
                    continue
                real = os.path.realpath(full)
                if not os.path.isfile(real):
                    self._reject(full, None, "not a regular file")
                    continue
                if real in self._loaded_files:
                    log.info("backend file %s already loaded (same file as before); skipped", full)
                    continue
                self._loaded_files.add(real)
                self._load_file(full, real)

    def _load_file(self, full: str, real: str):
        mod_name = "tvm_ethos_backend_plugin_" + re.sub(r"\W", "_", os.path.basename(full))
        try:
            loader = importlib.machinery.SourceFileLoader(mod_name, real)
            spec = importlib.util.spec_from_loader(mod_name, loader)
            module = importlib.util.module_from_spec(spec)
            sys.modules[mod_name] = module
            loader.exec_module(module)
        except Exception as err:
            sys.modules.pop(mod_name, None)
            self._reject(full, None, f"cannot import: {type(err).__name__}: {err}")
            return
        self.register_plugin(module, source=full)

    def load_plugins(self):
        self._plugins_pending = False
        self.load_entry_points()
        self.load_path()

    def _load_pending_plugins(self) -> None:
        if self._plugins_pending:
            self.load_plugins()


_REGISTRY: BackendRegistry | None = None


def get_registry() -> BackendRegistry:
    """The process-wide registry: the built-in backends, with the entry points and
    TVM_ETHOS_BACKEND_PATH loaded once, when first needed (see the module's docstring)."""
    global _REGISTRY
    if _REGISTRY is None:
        reg = BackendRegistry()
        _REGISTRY = reg
        reg.load_builtins()
        reg._plugins_pending = True
    return _REGISTRY


def reset_registry():
    """Forget the registry (tests; a changed TVM_ETHOS_BACKEND_PATH)."""
    global _REGISTRY
    _REGISTRY = None


def get_backend(backend_id: str) -> Backend:
    return get_registry().get(backend_id)
