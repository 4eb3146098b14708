"""Compiled-model cache (seed 003: OpenVINO's NPU model caching).

``compile(model, target, cache_dir=...)`` (or ``$TVM_ETHOS_CACHE_DIR``) looks for
``<cache_dir>/<key>.tvmethos`` first and loads it; otherwise it compiles and stores the result
there. The key is a SHA-256 over:

* the model: the file's bytes (a path), the bytes themselves, or an IRModule's text plus the
  bytes of every constant in it;
* the parsed target list, every per-target option included (defaults filled in), and the other
  compile options that change what is built (runtime-only options - ``fallback_mode``,
  ``opencl_device``, ``misaligned``, ``max_requests`` - are applied at load and left out);
* the package: tvm-ethos's version *and* a digest of its Python sources (a code change
  invalidates the cache even when nobody bumped the version), TVM's version, and the saved
  format versions.

Writes go to a temporary file in the cache directory and are renamed into place, so a reader
never sees half a model and two processes compiling the same model do not clash.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

CACHE_ENV_VAR = "TVM_ETHOS_CACHE_DIR"
SUFFIX = ".tvmethos"

_PACKAGE_DIGEST: str | None = None


def package_fingerprint() -> str:
    """tvm-ethos version + digest of its sources + TVM version (computed once per process)."""
    global _PACKAGE_DIGEST
    if _PACKAGE_DIGEST is None:
        import tvm

        root = Path(__file__).resolve().parents[1]
        h = hashlib.sha256()
        for p in sorted(root.rglob("*.py")):
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
        try:
            from importlib.metadata import version

            ver = version("tvm-ethos")
        except Exception:  # pragma: no cover - running from a bare source tree
            ver = "unknown"
        _PACKAGE_DIGEST = f"tvm-ethos {ver} src {h.hexdigest()[:16]} tvm {tvm.__version__}"
    return _PACKAGE_DIGEST


def model_digest(model) -> str:
    """SHA-256 of the model's bytes (path, bytes, or an IRModule's JSON)."""
    import tvm

    h = hashlib.sha256()
    if isinstance(model, (bytes, bytearray, memoryview)):
        h.update(b"bytes:")
        h.update(bytes(model))
    elif isinstance(model, (str, os.PathLike)):
        h.update(b"file:")
        h.update(Path(model).read_bytes())
    elif isinstance(model, tvm.IRModule):
        h.update(b"irmodule:")
        _hash_irmodule(model, h)
    else:
        raise TypeError(f"cannot hash a model of type {type(model).__name__}")
    return h.hexdigest()


def _hash_irmodule(mod, h) -> None:
    """The module's text (without its metadata) and the bytes of every constant in it, in a
    fixed order. (``tvm.ir.save_json`` and ``script(show_meta=True)`` crash on the frontend's
    ``params`` attribute in TVM 0.27, so the constants are read one by one.)"""
    import numpy as np
    import tvm
    from tvm import relax

    h.update(mod.script().encode())

    def add_tensor(t):
        a = np.ascontiguousarray(t.numpy())
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(a.tobytes())

    for gv, func in sorted(mod.functions.items(), key=lambda kv: kv[0].name_hint):
        if not isinstance(func, relax.Function):
            continue
        consts = []
        relax.analysis.post_order_visit(
            func, lambda e: consts.append(e) if isinstance(e, tvm.ir.expr.GenericConst) else None
        )
        for c in consts:
            add_tensor(c.value)
        params = func.attrs["params"] if func.attrs is not None and "params" in func.attrs else []
        for t in params:
            if hasattr(t, "numpy"):
                add_tensor(t)


def _plain(v):
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in sorted(v.items())}
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return repr(v)


def cache_key(model, targets: str, options: dict, format_versions=()) -> str:
    payload = json.dumps(
        {
            "model": model_digest(model),
            "targets": str(targets),
            "options": _plain(dict(options)),
            "package": package_fingerprint(),
            "formats": list(format_versions),
        },
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def resolve_cache_dir(option) -> str | None:
    """The cache directory: the option (``False`` / ``""`` disables), else the env var, else None."""
    if option is False or option == "":
        return None
    if option is not None:
        return os.path.expanduser(os.fspath(option))
    env = os.environ.get(CACHE_ENV_VAR)
    return os.path.expanduser(env) if env else None


def entry_path(cache_dir: str, key: str) -> str:
    return os.path.join(cache_dir, key + SUFFIX)


def lookup(cache_dir: str, key: str) -> str | None:
    p = entry_path(cache_dir, key)
    return p if os.path.isfile(p) else None


def store(cache_dir: str, key: str, compiled) -> str:
    """Save ``compiled`` under ``key`` atomically; returns the path."""
    os.makedirs(cache_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=SUFFIX, dir=cache_dir)
    os.close(fd)
    try:
        compiled.save(tmp)
        final = entry_path(cache_dir, key)
        os.replace(tmp, final)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return final
