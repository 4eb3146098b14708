"""The compiled-model container (tvm_ethos/package.py): a tar for *.tar names, a zip otherwise,
read back by content whatever the name, byte-deterministic, and verified against its manifest:
whatever is done to the bytes, reading gives the members that were written or one
ModelLoadError line, never other members."""
import hashlib
import io
import json
import os
import tarfile
import tracemalloc
import zipfile
from contextlib import nullcontext

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tvm_ethos.errors import ModelLoadError
from tvm_ethos.package import (
    FORMAT_VERSION,
    MANIFEST,
    _manifest_digest,
    manifest_bytes,
    package_bytes,
    read_package,
    read_package_bytes,
    write_package,
)

optional = st.sampled_from([(), ("program.json", "constants.bin")])
members_st = st.builds(
    lambda lib, meta, opt, blobs: {"model.so": lib, "meta.json": meta,
                                   **dict(zip(opt, blobs))},
    st.binary(max_size=3000), st.binary(max_size=600), optional,
    st.lists(st.binary(max_size=1500), min_size=2, max_size=2))
NAMES = ["m.tar", "m.TAR", "m.tvmethos", "m.zip"]


def _package(tar: bool, size: int = 5000) -> tuple[bytes, dict]:
    members = {"model.so": bytes(range(256)) * (size // 256), "meta.json": b"{}" * 300,
               "program.json": b"[]" * 200, "constants.bin": b"\x07" * 640}
    return package_bytes(list(members.items()), tar=tar), members


@settings(max_examples=30, deadline=None)
@given(members=members_st, name=st.sampled_from(NAMES))
def test_round_trip_and_container_by_name(members, name, tmp_path_factory):
    d = tmp_path_factory.mktemp("pkg")
    path = d / name
    items = list(members.items())
    write_package(path, items)
    assert tarfile.is_tarfile(path) == name.lower().endswith(".tar")
    assert zipfile.is_zipfile(path) != name.lower().endswith(".tar")
    assert read_package(path) == members
    # the same members give the same bytes (fixed times, owners, modes, order)
    again = d / ("again" + os.path.splitext(name)[1])
    write_package(again, items)
    assert again.read_bytes() == path.read_bytes()
    # read by content: a renamed file still loads
    renamed = d / "renamed.bin"
    os.replace(path, renamed)
    assert read_package(renamed) == members


def test_tar_is_plain_owned_by_nobody_and_starts_with_its_manifest(tmp_path):
    write_package(tmp_path / "m.tar", [("model.so", b"\x7fELF"), ("meta.json", b"{}")])
    with tarfile.open(tmp_path / "m.tar") as t:
        infos = t.getmembers()
        manifest = json.loads(t.extractfile(infos[0]).read())
    assert [i.name for i in infos] == [MANIFEST, "model.so", "meta.json"]
    assert {(i.mtime, i.uid, i.gid, i.uname, i.gname, i.mode) for i in infos} == {
        (0, 0, 0, "", "", 0o644)}
    assert manifest["format_version"] == FORMAT_VERSION
    assert manifest["members"] == [["meta.json", 2, hashlib.sha256(b"{}").hexdigest()],
                                   ["model.so", 4, hashlib.sha256(b"\x7fELF").hexdigest()]]


@pytest.mark.parametrize("members", [
    [("meta.json", b"{}")],                                     # no library
    [("model.so", b""), ("meta.json", b"{}"), ("extra", b"")],  # unknown name
    [("model.so", b""), ("meta.json", b"{}"), ("meta.json", b"{}")],
])
def test_only_known_members_are_written(members):
    with pytest.raises(ValueError, match="a package holds"):
        package_bytes(members)


@pytest.mark.parametrize("content, words", [
    (b"not an archive at all", "neither a tar nor a zip"),
    (b"", "neither a tar nor a zip"),
])
def test_other_files_are_rejected(tmp_path, content, words):
    p = tmp_path / "x.tar"
    p.write_bytes(content)
    with pytest.raises(ModelLoadError, match=words):
        read_package(p)


def _read_or_error(data: bytes):
    try:
        return read_package_bytes(data, "pkg")
    except ModelLoadError as err:
        msg = str(err)
        assert msg.startswith("pkg: ") and "\n" not in msg and "Traceback" not in msg, msg
        return None


@settings(max_examples=150, deadline=None)
@given(tar=st.booleans(), cut=st.floats(0, 1, exclude_max=True))
def test_a_cut_package_is_refused_or_whole(tar, cut):
    """Cut anywhere: refused in one line, or (a tar cut in its trailing zero padding) the
    members that were written."""
    data, members = _package(tar)
    got = _read_or_error(data[:int(cut * len(data))])
    assert got is None or got == members


@settings(max_examples=300, deadline=None)
@given(tar=st.booleans(), where=st.floats(0, 1, exclude_max=True), bit=st.integers(0, 7))
def test_a_flipped_bit_is_refused_or_harmless(tar, where, bit):
    """Flip any bit: refused in one line, or (a bit of a header field no reader uses, the
    padding) the members that were written: never other members."""
    data, members = _package(tar)
    damaged = bytearray(data)
    damaged[int(where * len(data))] ^= 1 << bit
    got = _read_or_error(bytes(damaged))
    assert got is None or got == members


def test_member_bytes_changed_are_caught_by_the_manifest():
    """A member rewritten in place (same size, container fields fixed up: the zip's CRC, the
    tar's checksum) still differs from its SHA-256 in the manifest."""
    for tar in (False, True):
        _, members = _package(tar)
        good = manifest_bytes(list(members.items()))
        altered = dict(members, **{"constants.bin": b"\x08" + members["constants.bin"][1:]})
        data = _container([(MANIFEST, good), *altered.items()], tar)
        with pytest.raises(ModelLoadError, match="constants.bin does not match its SHA-256"):
            read_package_bytes(data, "pkg")


def _container(members, tar: bool, deflate: str | None = None) -> bytes:
    """An archive of exactly ``members`` (no manifest added), for forging packages."""
    buf = io.BytesIO()
    if tar:
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    else:
        with zipfile.ZipFile(buf, "w") as z:
            for name, data in members:
                z.writestr(name, data, zipfile.ZIP_DEFLATED if name == deflate
                           else zipfile.ZIP_STORED)
    return buf.getvalue()


def test_the_manifest_is_covered_by_its_own_digest():
    _, members = _package(False)
    manifest = json.loads(manifest_bytes(list(members.items())))
    manifest["members"][0][1] += 1          # a size changed, the digest not
    data = _container([(MANIFEST, json.dumps(manifest).encode()), *members.items()], False)
    with pytest.raises(ModelLoadError, match="does not match its own SHA-256"):
        read_package_bytes(data, "pkg")


@pytest.mark.parametrize("tar", [False, True])
@pytest.mark.parametrize("change, words", [
    ("extra member", "unknown member 'notes.txt'"),
    ("missing member", "member program.json is missing"),
    ("no manifest", "no manifest.json"),
    ("duplicate", "appears twice"),
])
def test_members_must_be_the_manifest_s(tar, change, words):
    _, members = _package(tar)
    items = [(MANIFEST, manifest_bytes(list(members.items()))), *members.items()]
    if change == "extra member":
        items.append(("notes.txt", b"hello"))
    elif change == "missing member":
        items = [m for m in items if m[0] != "program.json"]
    elif change == "no manifest":
        items = items[1:]
    else:
        items.append(("meta.json", members["meta.json"]))
    with pytest.warns(UserWarning) if change == "duplicate" and not tar else nullcontext():
        data = _container(items, tar)
    with pytest.raises(ModelLoadError, match=words):
        read_package_bytes(data, "pkg")


@pytest.mark.parametrize("tar", [False, True])
def test_a_package_of_format_1_says_recompile(tar):
    """Format 1 had no manifest: refused with its version and what to do."""
    meta = json.dumps({"format_version": 1, "inputs": [], "outputs": []}).encode()
    data = _container([("model.so", b"\x7fELF"), ("meta.json", meta)], tar)
    with pytest.raises(ModelLoadError, match=r"package format 1 is older than this tvm-ethos "
                                             rf"\({FORMAT_VERSION}\): recompile"):
        read_package_bytes(data, "pkg")


def test_a_newer_format_says_upgrade():
    _, members = _package(False)
    entries = json.loads(manifest_bytes(list(members.items())))["members"]
    manifest = {"format_version": FORMAT_VERSION + 1, "members": entries,
                "sha256": _manifest_digest(FORMAT_VERSION + 1, entries)}
    data = _container([(MANIFEST, json.dumps(manifest).encode()), *members.items()], False)
    with pytest.raises(ModelLoadError, match="is newer than this tvm-ethos .* upgrade"):
        read_package_bytes(data, "pkg")


def test_a_compressed_zip_member_is_refused():
    _, members = _package(False)
    items = [(MANIFEST, manifest_bytes(list(members.items()))), *members.items()]
    with pytest.raises(ModelLoadError, match="'model.so' is not a plain stored file"):
        read_package_bytes(_container(items, False, deflate="model.so"), "pkg")


def test_tar_cut_between_members_is_rejected(tmp_path):
    """A tar cut right after a whole member would read as a shorter archive (a package
    without its executor program); the manifest and the end-of-archive marker give it away."""
    data, _ = _package(True)
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        infos = t.getmembers()
    cut = infos[-1].offset        # the header of constants.bin, the last member
    with tarfile.open(fileobj=io.BytesIO(data[:cut])) as t:   # what tarfile alone makes of it
        assert t.getnames() == [i.name for i in infos[:-1]]
    with pytest.raises(ModelLoadError, match="damaged compiled model"):
        read_package_bytes(data[:cut], "pkg")


def test_not_a_regular_file_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "m.tar"
    os.mkfifo(fifo)                          # opening it for reading would wait for a writer
    with pytest.raises(ModelLoadError, match="not a regular file"):
        read_package(fifo)
    with pytest.raises(ModelLoadError, match="not a regular file"):
        read_package(tmp_path)
    with pytest.raises(ModelLoadError, match="cannot open"):
        read_package(tmp_path / "missing.tar")


# ---------------------------------------------------------------------- memory: nothing unused
def _peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
    except ModelLoadError:
        pass
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def _declare_size(data: bytes, name: str, size: int) -> bytes:
    """``data`` (a zip) with member ``name``'s uncompressed size set to ``size`` in its local
    header and its central directory entry."""
    out = bytearray(data)
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        info = z.getinfo(name)
    out[info.header_offset + 22:info.header_offset + 26] = size.to_bytes(4, "little")
    central = out.rindex(b"PK\x01\x02", 0, out.rindex(name.encode()) + 1)
    out[central + 24:central + 28] = size.to_bytes(4, "little")
    return bytes(out)


def test_unused_and_sparse_members_are_never_read():
    """Issue 25: a zip with an unused 3 GiB member and a tar with a 3 GiB sparse member were
    read whole (6.4 GB, 3.4 GB RSS). Now they are refused from their headers: the peak Python
    allocation stays within twice that of reading the intact package."""
    data, members = _package(False, size=200_000)
    legit = _peak(lambda: read_package_bytes(data, "pkg"))
    items = [(MANIFEST, manifest_bytes(list(members.items()))), *members.items()]
    big = _declare_size(_container(items + [("unused.bin", b"\0" * 4096)], False,
                                   deflate="unused.bin"), "unused.bin", 3 << 30)
    assert zipfile.ZipFile(io.BytesIO(big)).getinfo("unused.bin").file_size == 3 << 30
    assert _peak(lambda: read_package_bytes(big, "pkg")) < 2 * legit
    with pytest.raises(ModelLoadError, match="unknown member 'unused.bin'"):
        read_package_bytes(big, "pkg")
    # a stored member claiming more than the whole file
    claim = _declare_size(package_bytes(list(members.items())), "model.so", 3 << 30)
    assert _peak(lambda: read_package_bytes(claim, "pkg")) < 2 * legit
    with pytest.raises(ModelLoadError, match="claims 3,221,225,472 bytes"):
        read_package_bytes(claim, "pkg")
    # a GNU sparse member after the manifest: 3 GiB of holes in a few kilobytes
    tar = package_bytes(list(members.items()), tar=True)
    sparse = _gnu_sparse_tar(tar, "model.so", 3 << 30)
    assert _peak(lambda: read_package_bytes(sparse, "pkg")) < 2 * legit
    with pytest.raises(ModelLoadError, match="'model.so' is not a plain file"):
        read_package_bytes(sparse, "pkg")


def _gnu_sparse_tar(tar: bytes, name: str, real_size: int) -> bytes:
    """``tar`` with member ``name`` turned into a GNU sparse file of ``real_size`` bytes whose
    one data block is its stored bytes (the rest holes)."""
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        m = t.getmember(name)
    h = bytearray(tar[m.offset:m.offset + tarfile.BLOCKSIZE])
    h[156:157] = tarfile.GNUTYPE_SPARSE
    h[257:265] = tarfile.GNU_MAGIC
    h[386:398] = b"%011o\0" % 0               # sparse map: one extent at offset 0 ...
    h[398:410] = b"%011o\0" % m.size          # ... of the member's stored size
    h[483:495] = b"%011o\0" % real_size       # the file's real (expanded) size
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return tar[:m.offset] + bytes(h) + tar[m.offset + tarfile.BLOCKSIZE:]
