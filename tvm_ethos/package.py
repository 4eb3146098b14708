"""The compiled-model file: a few named members (the shared library, metadata, the executor's
program and constants) in one archive.

Two containers, chosen by the file name when writing and by the file's first bytes when
reading: a tar for a name ending in ``.tar`` (tvmc's packages were tar files, so ``tvmc compile
-o model.tar`` gives one that ``tar tf`` lists), a stored zip otherwise (``.tvmethos``, the
compiled-model cache). Both are byte-deterministic: fixed member order, timestamps, owners and
permissions (rfcs/0006-reliability.md), so the same model compiles to the same file.
"""
from __future__ import annotations

import io
import os
import tarfile
import zipfile

from tvm_ethos.errors import ModelLoadError

_ZIP_MAGIC = b"PK\x03\x04"
_TAR_MAGIC_OFFSET = 257          # "ustar" in a POSIX tar header
_TAR_MAGIC = b"ustar"


def is_tar_name(path) -> bool:
    return os.fspath(path).lower().endswith(".tar")


def write_package(path, members: list[tuple[str, bytes]]) -> None:
    """Write ``members`` (name, bytes), in order, as a tar (``*.tar``) or a stored zip."""
    path = os.fspath(path)
    data = package_bytes(members, tar=is_tar_name(path))
    with open(path, "wb") as f:
        f.write(data)


def package_bytes(members: list[tuple[str, bytes]], tar: bool = False) -> bytes:
    """The bytes :func:`write_package` writes: a tar when ``tar``, else a stored zip."""
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


def read_package(path) -> dict[str, bytes]:
    """The members of a file written by :func:`write_package`, whatever its name.

    Raises ModelLoadError for a file that is neither container, or a damaged one (a truncated
    tar included, which ``tarfile`` alone would read as a shorter archive)."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        return read_package_bytes(f.read(), path)


def read_package_bytes(data: bytes, path: str) -> dict[str, bytes]:
    """:func:`read_package` on bytes already read (``path`` names them in errors)."""
    try:
        if data.startswith(_ZIP_MAGIC):
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                return {n: z.read(n) for n in z.namelist()}
        if data[_TAR_MAGIC_OFFSET:_TAR_MAGIC_OFFSET + len(_TAR_MAGIC)] == _TAR_MAGIC:
            return _read_tar(data)
    except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError) as err:
        raise ModelLoadError(f"{path}: damaged compiled model ({err})") from None
    raise ModelLoadError(f"{path}: not a tvm-ethos compiled model (neither a tar nor a zip "
                         "file); write one with tvmc compile or CompiledModel.save")


def _read_tar(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as t:
        out = {}
        for m in t.getmembers():
            if m.isfile():
                out[m.name] = t.extractfile(m).read()
                if len(out[m.name]) != m.size:
                    raise tarfile.ReadError(f"member {m.name} is cut short")
        end = data[t.offset:t.offset + 2 * tarfile.BLOCKSIZE]   # the end-of-archive marker
    if len(end) < 2 * tarfile.BLOCKSIZE or any(end):
        raise tarfile.ReadError("the archive is cut short (no end-of-archive marker)")
    return out


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
