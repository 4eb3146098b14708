"""The command line's checks of file paths and of numeric arguments, before any work.

Every path a command reads or writes is checked before anything is imported, compiled or
run, so a typo costs no compile and gives one line naming the path, what it is for and why
it cannot be used (rfcs/0006: one line, exit status 2). Outputs are probed for real (a
scratch file created and removed in their folder, an existing file opened for appending,
nothing written): permission bits say nothing about read-only mounts or /proc. A write that
still fails later (the disk fills up) is reported the same way by ``write_failed``.

This module must stay importable without TVM (``cli.py``'s rule).
"""
from __future__ import annotations

import os
import stat
import tempfile

from tvm_ethos.errors import TvmEthosError


class CliError(TvmEthosError, ValueError):
    """Bad command-line input; reported as one line, exit status 2."""


def _kind(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a named pipe"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _stat(path: str, what: str, verb: str) -> os.stat_result | None:
    """``os.stat(path)``, None when nothing is there; a CliError for a path the system
    refuses (a NUL byte, a name too long, a folder in the way that is a file)."""
    if not path:
        raise CliError(f"{what} is an empty path; give a file name")
    try:
        return os.stat(path)
    except ValueError:
        raise CliError(f"cannot {verb} {what} {path!r}: the path contains a NUL byte") from None
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise CliError(f"cannot {verb} {what} {path!r}: {os.path.dirname(path)!r} is not a "
                       "folder") from None
    except OSError as e:
        raise CliError(f"cannot {verb} {what} {path!r}: {e.strerror}") from None


def require_file(path: str, what: str) -> None:
    """A one-line error unless ``path`` is a regular file this process can read (``what``
    names it, e.g. 'model file')."""
    st = _stat(path, what, "read")
    if st is None:
        raise CliError(f"{what} {path!r} does not exist")
    if stat.S_ISDIR(st.st_mode):
        raise CliError(f"{what} {path!r} is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise CliError(f"{what} {path!r} is {_kind(st.st_mode)}, not a regular file; give "
                       "the path of a file")
    try:
        with open(path, "rb"):
            pass
    except OSError as e:
        raise CliError(f"cannot read {what} {path!r}: {e.strerror}") from None


def require_writable(path: str, what: str) -> None:
    """A one-line error, before any work, unless ``path`` can be written as a new or
    replaced regular file: its folder exists and takes a new file, and an existing
    ``path`` is a regular file open to writing. Nothing is written to ``path``."""
    st = _stat(path, what, "write")
    folder = os.path.dirname(os.path.abspath(path))
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise CliError(f"cannot write {what} {path!r}: it is a folder; give a file name")
        if not stat.S_ISREG(st.st_mode):
            raise CliError(f"cannot write {what} {path!r}: it is {_kind(st.st_mode)}, not a "
                           "regular file; give a file path")
        try:
            with open(path, "ab"):      # appends nothing: the file is unchanged
                pass
        except OSError as e:
            raise CliError(f"cannot write {what} {path!r}: {e.strerror}") from None
        return
    if path.endswith(os.sep):
        raise CliError(f"cannot write {what} {path!r}: the path names a folder; give a file "
                       "name")
    if not os.path.isdir(folder):
        there = "is not a folder" if os.path.exists(folder) else "does not exist"
        raise CliError(f"cannot write {what} {path!r}: folder {folder!r} {there}")
    try:
        fd, scratch = tempfile.mkstemp(prefix=".tvmc-probe-", dir=folder)
    except OSError as e:
        raise CliError(f"cannot write {what} {path!r}: cannot create a file in {folder!r}: "
                       f"{e.strerror}") from None
    os.close(fd)
    os.unlink(scratch)


def require_distinct(paths: dict[str, str | None]) -> None:
    """A one-line error when two of the named paths (``{what: path}``; None: not given)
    are the same file, so that one output would overwrite the other, or the input."""
    seen: dict[str, str] = {}
    for what, path in paths.items():
        if not path:
            continue
        key = os.path.realpath(path)
        if key in seen:
            other = seen[key] if seen[key].startswith(("the ", "-")) else f"the {seen[key]}"
            raise CliError(f"{what} {path!r} is the same file as {other}; give another path")
        seen[key] = what


def write_failed(path: str, what: str, err: OSError) -> CliError:
    """The one-line error for an output that could not be written after all (disk full,
    removed folder); a partial file is removed."""
    try:
        if os.path.isfile(path):
            os.unlink(path)
    except OSError:
        pass
    return CliError(f"cannot write {what} {path!r}: {err.strerror or err}")


def check_int_range(value: int, flag: str, lo: int, hi: int | None = None) -> None:
    """A one-line error unless ``lo <= value`` (and ``value <= hi`` when given)."""
    if value < lo or (hi is not None and value > hi):
        allowed = f"from {lo} to {hi}" if hi is not None else f">= {lo}"
        raise CliError(f"{flag} must be {allowed}, got {value}")
