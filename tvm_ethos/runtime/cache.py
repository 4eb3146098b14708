"""Compiled-model cache (after OpenVINO's NPU model caching).

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
  format versions;
* the CPU the host code is built for: its ``-mcpu`` and the instruction-set extensions the code
  may use (runtime/host_cpu.py), so a cache shared by machines of different CPUs never hands
  one of them code it cannot run.

An entry is native code that ``compile`` loads into the process, so the cache is guarded as a
directory of executables would be:

* the directory is created ``0700``; an existing directory or entry that is not owned by the
  user, or is writable by group or others, is refused with :class:`CacheError` (whoever can
  write there can run code in your process; nothing is loaded, nothing is recompiled);
* an entry is read only if it is a regular file (opened without blocking, then checked with
  ``fstat``): a FIFO, a directory or a device in its place is a :class:`CacheError`, as is a
  cache directory that names a file;
* every entry starts with a header line carrying the SHA-256 of the package after it, checked
  on the bytes that are then loaded (no second read to race with). A mismatch is damage
  (a full disk, a killed writer of an older version, bit rot): the entry is compiled again and
  overwritten, with a :class:`CacheWarning`;
* writes go to a temporary file in the cache directory and are renamed into place
  (``os.replace``), so a reader never sees half a model and two processes compiling the same
  model do not clash: the last rename wins, with a whole entry either way;
* the package inside is then verified as any package is (tvm_ethos/package.py: manifest,
  schema) before its library is loaded; one that fails is damage too.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import warnings
from pathlib import Path

from tvm_ethos._version import __version__ as ver
from tvm_ethos.errors import TvmEthosError

CACHE_ENV_VAR = "TVM_ETHOS_CACHE_DIR"
SUFFIX = ".tvmethos"
#: The first line of an entry: this magic, a space, the package's SHA-256 in hex, a newline.
HEADER_MAGIC = b"tvm-ethos-cache-v1"
_HEADER_LEN = len(HEADER_MAGIC) + 1 + 64 + 1


class CacheError(TvmEthosError):
    """A cache directory or entry that others could have written: refused, never loaded."""


class CacheWarning(UserWarning):
    """A damaged cache entry, compiled again."""

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


def cache_key(model, targets: str, options: dict, format_versions=(), cpu=None) -> str:
    """``cpu``: the CPU record of the host code that will be built (``CpuRecord.to_json()``,
    runtime/host_cpu.py): machines with different CPUs sharing a cache get different entries,
    each with code its CPU can run."""
    payload = json.dumps(
        {
            "model": model_digest(model),
            "targets": str(targets),
            "options": _plain(dict(options)),
            "package": package_fingerprint(),
            "formats": list(format_versions),
            "cpu": _plain(cpu),
        },
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def resolve_cache_dir(option) -> str | None:
    """The cache directory: the option (``False`` / ``""`` disables), else the env var, else
    None."""
    if option is False or option == "":
        return None
    if option is not None:
        return os.path.expanduser(os.fspath(option))
    env = os.environ.get(CACHE_ENV_VAR)
    return os.path.expanduser(env) if env else None


def entry_path(cache_dir: str, key: str) -> str:
    return os.path.join(cache_dir, key + SUFFIX)


def _current_uid() -> int:
    return os.getuid()


def _file_stat(f) -> os.stat_result:
    return os.fstat(f.fileno())


def check_trusted(path: str, st: os.stat_result, what: str) -> None:
    """CacheError unless ``st`` (of ``path``) is owned by this user and not writable by group
    or others: such a file or folder could hold code someone else wrote."""
    if st.st_uid != _current_uid():
        raise CacheError(f"compiled-model cache {what} {path} is owned by user id {st.st_uid}, not "
                         f"by you ({_current_uid()}): refusing to load code someone else wrote; "
                         "remove it or use another cache_dir")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheError(f"compiled-model cache {what} {path} is writable by group or others "
                         f"(mode {stat.S_IMODE(st.st_mode):o}): refusing to load code someone else "
                         f"could have written; run 'chmod go-w {path}' or remove it")


def ensure_dir(cache_dir: str) -> None:
    """Create the cache directory ``0700`` (parents as ``makedirs`` makes them) and check it;
    CacheError, one line, for a path that is not a directory or cannot be made one."""
    if os.path.exists(cache_dir) and not os.path.isdir(cache_dir):
        raise CacheError(f"compiled-model cache directory {cache_dir} (cache_dir or "
                         f"${CACHE_ENV_VAR}) is not a directory; name a directory, or remove it")
    try:
        os.makedirs(cache_dir, mode=0o700, exist_ok=True)
        st = os.stat(cache_dir)
    except OSError as err:
        raise CacheError(f"cannot create the compiled-model cache directory {cache_dir} "
                         f"(cache_dir or ${CACHE_ENV_VAR}): {err.strerror}; name another "
                         "directory") from None
    if not stat.S_ISDIR(st.st_mode):
        raise CacheError(f"compiled-model cache directory {cache_dir} is not a directory; name "
                         "a directory, or remove it")
    check_trusted(cache_dir, st, "directory")


def lookup(cache_dir: str, key: str) -> bytes | None:
    """The package bytes stored under ``key``, or None when there is no entry or it is damaged
    (a :class:`CacheWarning` says so; the caller compiles again and overwrites it).
    CacheError when the directory or the entry could have been written by someone else."""
    p = entry_path(cache_dir, key)
    if not os.path.isdir(cache_dir):
        return None
    check_trusted(cache_dir, os.stat(cache_dir), "directory")
    try:
        # O_NONBLOCK: a FIFO put in an entry's place must not block the open (it is refused
        # below, as a directory or a device is: only regular files are read)
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    except OSError as err:
        raise CacheError(f"cannot open compiled-model cache entry {p} ({err.strerror}); "
                         "remove it") from None
    st = os.fstat(fd)   # the file read below, not whatever the name points to later
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise CacheError(f"compiled-model cache entry {p} is not a regular file; remove it")
    with os.fdopen(fd, "rb") as f:
        check_trusted(p, _file_stat(f), "entry")
        try:
            data = f.read()
        except OSError as err:
            raise CacheError(f"cannot read compiled-model cache entry {p} ({err.strerror}); "
                             "remove it") from None
    package = verified_package(data)
    if package is None:
        damaged(p, "its content hash does not match")
    return package


def damaged(path: str, why: str) -> None:
    warnings.warn(f"compiled-model cache entry {path} is damaged ({why}); compiling again",
                  CacheWarning, stacklevel=3)


def verified_package(data: bytes) -> bytes | None:
    """The package after a valid header whose SHA-256 matches it, else None."""
    head, package = data[:_HEADER_LEN], data[_HEADER_LEN:]
    if not head.startswith(HEADER_MAGIC + b" ") or not head.endswith(b"\n"):
        return None
    digest = head[len(HEADER_MAGIC) + 1:-1].decode("ascii", "replace")
    return package if hashlib.sha256(package).hexdigest() == digest else None


def entry_bytes(package: bytes) -> bytes:
    """An entry: the header line with the package's SHA-256, then the package."""
    return HEADER_MAGIC + b" " + hashlib.sha256(package).hexdigest().encode() + b"\n" + package


def store(cache_dir: str, key: str, package: bytes) -> str:
    """Store ``package`` (a saved compiled model's bytes) under ``key`` atomically: written
    to a temporary name in the cache directory, then renamed over the entry. Returns the path."""
    ensure_dir(cache_dir)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=SUFFIX, dir=cache_dir)   # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(entry_bytes(package))
            f.flush()
            os.fsync(f.fileno())
        final = entry_path(cache_dir, key)
        os.replace(tmp, final)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return final
