"""The compiled-model file: a manifest and a few named members (the shared library, metadata,
the executor's program and constants) in one archive, verified before any of its code runs.

Two containers, chosen by the file name when writing and by the file's first bytes when
reading: a tar for a name ending in ``.tar`` (tvmc's packages were tar files, so ``tvmc compile
-o model.tar`` gives one that ``tar tf`` lists), a stored zip otherwise (``.tvmethos``, the
compiled-model cache). Both are byte-deterministic: fixed member order, timestamps, owners and
permissions (rfcs/0006-reliability.md), so the same model compiles to the same file.

The first member, ``manifest.json``, lists every other member with its size and SHA-256, and
carries the SHA-256 of that list. Loading (:func:`verify_package`) goes in a fixed order, each
step refusing with one :class:`ModelLoadError` line before the next begins:

1. members: only regular, stored members with known names, each streamed with the manifest's
   size as its limit and hashed; a member missing, extra, longer, shorter or with another hash
   is damage (nothing is read beyond what the manifest allows, nothing written to disk);
2. metadata: ``meta.json`` and ``program.json`` (with ``constants.bin``) parsed against their
   schema (tvm_ethos/package_meta.py, tvm_ethos/runtime/program.py);
3. the host: checks that this machine can run the package's code go here, after the metadata
   is known to be sound and before the code is loaded;
4. the caller loads the shared library (``tvm_ethos.compiler.load_members``).

The manifest guards against damage and against edits of the data (a truncated copy, a flipped
bit, a hand-edited ``meta.json``); it does not guard against whoever writes the whole package,
manifest included: the library is native code and is trusted as such.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import tarfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import BinaryIO, NamedTuple

from tvm_ethos.backends.registry import get_registry
from tvm_ethos.errors import ModelLoadError
from tvm_ethos.package_meta import PackageMeta, parse_meta
from tvm_ethos.runtime.program import NetworkProgram
from tvm_ethos.schema import Node, SchemaError, parse_json

#: The package layout this tvm-ethos writes and reads (1: no manifest).
FORMAT_VERSION = 2
MANIFEST = "manifest.json"
LIBRARY = "model.so"
META = "meta.json"
PROGRAM = "program.json"
CONSTANTS = "constants.bin"
#: Every member a package may hold besides the manifest; the first two are required, the last
#: two come together (a model with an executor program).
MEMBERS = (LIBRARY, META, PROGRAM, CONSTANTS)
#: Limits on what is read before the manifest vouches for it.
MANIFEST_LIMIT = 64 * 1024
_OLD_META_LIMIT = 16 * 1024 * 1024
_CHUNK = 1 << 20
_SMALL_CHUNK = 1 << 16

_ZIP_MAGIC = b"PK\x03\x04"
_TAR_MAGIC_OFFSET = 257          # "ustar" in a POSIX tar header
_TAR_MAGIC = b"ustar"
_TAR_FILE_TYPES = (tarfile.REGTYPE, tarfile.AREGTYPE)
# what the standard library's readers raise on a malformed archive
_ARCHIVE_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, tarfile.TarError, EOFError, OSError,
                   ValueError, UnicodeError, NotImplementedError, RuntimeError, OverflowError)


class Entry(NamedTuple):
    """One member as the manifest lists it."""

    name: str
    size: int
    sha256: str


@dataclass(frozen=True)
class VerifiedPackage:
    """A package whose members matched its manifest and whose metadata passed its schema: what
    the loader needs, nothing of it executed yet."""

    meta: PackageMeta
    program: NetworkProgram | None
    library: bytes
    members: Mapping[str, bytes]


class _Damaged(Exception):
    """A reason the package's bytes cannot be what was written (becomes a ModelLoadError)."""


class _OtherFormat(Exception):
    """A package of another format version (becomes a ModelLoadError)."""


# -------------------------------------------------------------------------------------- write
def is_tar_name(path) -> bool:
    return os.fspath(path).lower().endswith(".tar")


def write_package(path, members: list[tuple[str, bytes]]) -> None:
    """Write ``members`` (name, bytes), in order, after their manifest, as a tar (``*.tar``) or
    a stored zip."""
    path = os.fspath(path)
    data = package_bytes(members, tar=is_tar_name(path))
    with open(path, "wb") as f:
        f.write(data)


def package_bytes(members: list[tuple[str, bytes]], tar: bool = False) -> bytes:
    """The bytes :func:`write_package` writes: a tar when ``tar``, else a stored zip."""
    names = [n for n, _ in members]
    unknown = [n for n in names if n not in MEMBERS]
    if unknown or len(set(names)) != len(names) or not {LIBRARY, META} <= set(names):
        raise ValueError(f"a package holds {', '.join(MEMBERS)} once each ({LIBRARY} and {META} "
                         f"required), got {', '.join(names)}")
    members = [(MANIFEST, manifest_bytes(members)), *members]
    buf = io.BytesIO()
    if tar:
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
            for name, data in members:
                t.addfile(_tar_info(name, len(data)), io.BytesIO(data))
    else:
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as z:
            for name, data in members:
                z.writestr(_zip_info(name), data)
    return buf.getvalue()


def manifest_bytes(members: list[tuple[str, bytes]]) -> bytes:
    """``manifest.json`` for ``members``: each one's name, size and SHA-256 (sorted by name),
    and the SHA-256 of that list with the format version, so the manifest's own damage shows."""
    entries = [[n, len(d), hashlib.sha256(d).hexdigest()] for n, d in sorted(members)]
    return json.dumps({"format_version": FORMAT_VERSION, "members": entries,
                       "sha256": _manifest_digest(FORMAT_VERSION, entries)},
                      sort_keys=True).encode()


def _manifest_digest(version, entries) -> str:
    text = json.dumps([version, entries], separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


# --------------------------------------------------------------------------------------- read
def verify_package(path) -> VerifiedPackage:
    """Steps 1-3 of loading the package at ``path`` (module docstring); ModelLoadError, one
    line, for anything wrong with it."""
    path = os.fspath(path)
    return _verify(read_package(path), path)


def verify_package_bytes(data: bytes, path: str) -> VerifiedPackage:
    """:func:`verify_package` on bytes already read (``path`` names them in errors)."""
    return _verify(read_package_bytes(data, path), path)


def _verify(members: dict[str, bytes], path: str) -> VerifiedPackage:
    """Steps 2 and 3 on the members step 1 (:func:`read_package`) checked."""
    meta, program = _metadata(members, path)
    # 3. the host: a check that this machine can run the package's code goes here
    return VerifiedPackage(meta, program, members[LIBRARY], MappingProxyType(members))


def _metadata(members: dict[str, bytes], path: str) -> tuple[PackageMeta, NetworkProgram | None]:
    """Step 2: meta.json and program.json (with constants.bin) against their schema."""
    try:
        meta = parse_meta(members[META])
        if meta.format_version != FORMAT_VERSION:
            raise SchemaError(f"meta.json.format_version: {meta.format_version}, but the "
                              f"manifest says {FORMAT_VERSION}")
        program = None
        if PROGRAM in members:
            get_registry()   # the backends register the formats of the payloads it may hold
            program = NetworkProgram.from_json(members[PROGRAM], members[CONSTANTS])
            _check_io(meta, program)
    except SchemaError as err:
        raise ModelLoadError(f"{path}: invalid compiled model: {err} (edited, or written by "
                             "another tool: compile it again)") from None
    return meta, program


def _check_io(meta: PackageMeta, program: NetworkProgram) -> None:
    """meta.json's inputs and outputs are the program's, up to a reshape (the model's own
    shapes, e.g. 1x12, against the kernels' 1x1x1x12): a run checks and shapes its tensors by
    the one and allocates by the other."""
    for what, descs, tids in (("inputs", meta.inputs, program.inputs),
                              ("outputs", meta.outputs, program.outputs)):
        if len(descs) != len(tids):
            raise SchemaError(f"meta.json.{what}: {len(descs)} tensor(s), program.json has "
                              f"{len(tids)}")
        for i, (d, tid) in enumerate(zip(descs, tids)):
            t = program.tensors[tid]
            if (_elements(d.shape), d.dtype) != (_elements(t.shape), t.dtype):
                raise SchemaError(
                    f"meta.json.{what}[{i}]: {'x'.join(map(str, d.shape))} {d.dtype}, but "
                    f"program.json's tensor {tid} is {'x'.join(map(str, t.shape))} {t.dtype}")


def _elements(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def read_package(path) -> dict[str, bytes]:
    """The members of a file written by :func:`write_package`, whatever its name, each checked
    against the manifest (which is not returned).

    Raises ModelLoadError for a file that is not a regular file, neither container, a damaged
    one (truncated, altered, with unknown or missing members) or one of another format."""
    path = os.fspath(path)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as err:
        raise ModelLoadError(f"{path}: cannot open the compiled model ({err.strerror})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ModelLoadError(f"{path}: not a regular file; give the path of a package "
                             "written by tvmc compile or CompiledModel.save")
    with os.fdopen(fd, "rb") as f:
        return _read(f, st.st_size, path)


def read_package_bytes(data: bytes, path: str) -> dict[str, bytes]:
    """:func:`read_package` on bytes already read (``path`` names them in errors)."""
    return _read(io.BytesIO(data), len(data), path)


def _read(f: BinaryIO, size: int, path: str) -> dict[str, bytes]:
    head = f.read(_TAR_MAGIC_OFFSET + len(_TAR_MAGIC))
    f.seek(0)
    try:
        if head.startswith(_ZIP_MAGIC):
            return _read_zip(f, size)
        if head[_TAR_MAGIC_OFFSET:] == _TAR_MAGIC:
            return _read_tar(f, size)
    except _Damaged as err:
        raise ModelLoadError(f"{path}: damaged compiled model: {err}; compile it again") from None
    except _OtherFormat as err:
        raise ModelLoadError(f"{path}: {err}") from None
    except _ARCHIVE_ERRORS as err:
        why = " ".join(str(err).split())[:200] or type(err).__name__
        raise ModelLoadError(f"{path}: damaged compiled model ({why}); compile it "
                             "again") from None
    raise ModelLoadError(f"{path}: not a tvm-ethos compiled model (neither a tar nor a zip "
                         "file); write one with tvmc compile or CompiledModel.save")


def _read_zip(f: BinaryIO, size: int) -> dict[str, bytes]:
    with zipfile.ZipFile(f) as z:
        infos = {}
        for info in z.infolist():
            _check_name(info.filename, infos)
            if info.is_dir() or info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 1:
                raise _Damaged(f"member {info.filename!r} is not a plain stored file")
            if info.file_size > size:
                raise _Damaged(f"member {info.filename!r} claims {info.file_size:,} bytes, more "
                               f"than the whole file ({size:,})")
            infos[info.filename] = info
        if MANIFEST not in infos:
            _no_manifest(lambda: _old_meta_zip(z, infos))
        with z.open(infos[MANIFEST]) as stream:
            manifest = _manifest(_read_limited(stream, MANIFEST, MANIFEST_LIMIT))
        _same_members(manifest, [n for n in infos if n != MANIFEST])
        out = {}
        for e in manifest:
            if infos[e.name].file_size != e.size:
                raise _Damaged(f"member {e.name} is {infos[e.name].file_size:,} bytes, the "
                               f"manifest says {e.size:,}")
            with z.open(infos[e.name]) as stream:
                out[e.name] = _read_entry(stream, e)
    return out


def _read_tar(f: BinaryIO, size: int) -> dict[str, bytes]:
    with tarfile.open(fileobj=f, mode="r:") as t:
        first = t.next()
        if first is None or first.name != MANIFEST:
            _no_manifest(lambda: _old_meta_tar(t, first, size))
        _check_tar_member(first, size)
        manifest = {e.name: e for e in _manifest(
            _read_limited(t.extractfile(first), MANIFEST, MANIFEST_LIMIT))}
        seen: dict = {MANIFEST: first}
        out = {}
        while (m := t.next()) is not None:
            _check_name(m.name, seen)
            seen[m.name] = m
            _check_tar_member(m, size)
            e = manifest.get(m.name)
            if e is None:
                raise _Damaged(f"member {m.name} is not in the manifest")
            if m.size != e.size:
                raise _Damaged(f"member {m.name} is {m.size:,} bytes, the manifest says "
                               f"{e.size:,}")
            out[m.name] = _read_entry(t.extractfile(m), e)
        _same_members(list(manifest.values()), list(out))
        f.seek(t.offset)
        end = f.read(2 * tarfile.BLOCKSIZE)        # the end-of-archive marker
    if len(end) < 2 * tarfile.BLOCKSIZE or any(end):
        raise _Damaged("the archive is cut short (no end-of-archive marker)")
    return out


def _check_tar_member(m: tarfile.TarInfo, size: int) -> None:
    if m.type not in _TAR_FILE_TYPES or m.issparse():
        raise _Damaged(f"member {m.name!r} is not a plain file")
    if m.size > size:
        raise _Damaged(f"member {m.name!r} claims {m.size:,} bytes, more than the whole file "
                       f"({size:,})")


def _check_name(name: str, seen) -> None:
    if name not in MEMBERS and name != MANIFEST:
        raise _Damaged(f"unknown member {name[:80]!r} (a package holds {MANIFEST}, "
                       f"{', '.join(MEMBERS)})")
    if name in seen:
        raise _Damaged(f"member {name} appears twice")


def _same_members(manifest: list[Entry], names: list[str]) -> None:
    listed = {e.name for e in manifest}
    for n in names:
        if n not in listed:
            raise _Damaged(f"member {n} is not in the manifest")
    for n in MEMBERS:
        if n in listed and n not in names:
            raise _Damaged(f"member {n} is missing (the manifest lists it)")


def _manifest(data: bytes) -> list[Entry]:
    """The manifest's entries, after its own digest and format version are checked."""
    try:
        root = Node(parse_json(data, MANIFEST), MANIFEST).obj(
            ("format_version", "members", "sha256"))
        version_n, members_n = root.get("format_version"), root.get("members")
        if _manifest_digest(version_n.value, members_n.value) != root.get("sha256").value:
            raise _Damaged(f"{MANIFEST} does not match its own SHA-256")
        _check_format(version_n.int())
        entries = []
        for m in members_n.items():
            name_n, size_n, sha_n = m.items(length=3)
            entries.append(Entry(name_n.str(MEMBERS), size_n.int(), sha_n.str()))
    except SchemaError as err:
        raise _Damaged(str(err)) from None
    names = [e.name for e in entries]
    if names != sorted(set(names)) or not {LIBRARY, META} <= set(names) or \
            (PROGRAM in names) != (CONSTANTS in names):
        raise _Damaged(f"{MANIFEST} lists {', '.join(names)}; a package holds {LIBRARY} and "
                       f"{META}, and {PROGRAM} with {CONSTANTS} or neither, once each")
    return entries


def _check_format(version: int) -> None:
    if version < FORMAT_VERSION:
        raise _OtherFormat(f"package format {version} is older than this tvm-ethos "
                           f"({FORMAT_VERSION}): recompile the model (tvmc compile, or "
                           "tvm_ethos.compile(...).save)")
    if version > FORMAT_VERSION:
        raise _OtherFormat(f"package format {version} is newer than this tvm-ethos "
                           f"({FORMAT_VERSION}) reads: upgrade tvm-ethos or recompile the model "
                           "with this one")


def _no_manifest(old_meta) -> None:
    """No manifest: a package of format 1 (says so, with its version) or damage."""
    data = old_meta()
    if data is not None:
        try:
            version = parse_json(data, META).get("format_version")
        except SchemaError:
            version = None
        if isinstance(version, int) and not isinstance(version, bool):
            _check_format(version)
    raise _Damaged(f"no {MANIFEST} (not a package this tvm-ethos wrote)")


def _old_meta_zip(z: zipfile.ZipFile, infos: dict) -> bytes | None:
    if META not in infos:
        return None
    with z.open(infos[META]) as stream:
        return _read_limited(stream, META, _OLD_META_LIMIT)


def _old_meta_tar(t: tarfile.TarFile, first, size: int) -> bytes | None:
    m = first
    while m is not None:
        if m.name == META:
            _check_tar_member(m, size)
            return _read_limited(t.extractfile(m), META, _OLD_META_LIMIT)
        m = t.next()
    return None


def _read_limited(stream, name: str, limit: int) -> bytes:
    """At most ``limit`` bytes of ``stream``, in chunks (a reader asked for ``limit`` bytes at
    once may allocate them all before it finds the member is short)."""
    chunks, n = [], 0
    while chunk := stream.read(min(_SMALL_CHUNK, limit + 1 - n)):
        chunks.append(chunk)
        n += len(chunk)
        if n > limit:
            raise _Damaged(f"{name} is larger than {limit:,} bytes")
    return b"".join(chunks)


def _read_entry(stream, e: Entry) -> bytes:
    """The member's bytes, read in chunks no further than the manifest's size, hashed."""
    h, chunks, n = hashlib.sha256(), [], 0
    while True:
        chunk = stream.read(min(_CHUNK, e.size + 1 - n))
        if not chunk:
            break
        n += len(chunk)
        if n > e.size:
            raise _Damaged(f"member {e.name} is longer than the {e.size:,} bytes the manifest "
                           "says")
        h.update(chunk)
        chunks.append(chunk)
    if n != e.size:
        raise _Damaged(f"member {e.name} is cut short ({n:,} of {e.size:,} bytes)")
    if h.hexdigest() != e.sha256:
        raise _Damaged(f"member {e.name} does not match its SHA-256 in the manifest (the file "
                       "was damaged or altered after it was written)")
    return b"".join(chunks)


def _zip_info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    info.create_system = 3                      # unix, whatever the host
    info.external_attr = 0o644 << 16
    return info


def _tar_info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, 0, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info
