"""Failures from inside an importer, as one line for a tvm-ethos error."""
from __future__ import annotations

import re


def one_line(err: BaseException, last: bool = True) -> str:
    """An exception's message on one line: TVM errors carry a C++ backtrace before the message
    (``last``: keep the last line), checkers add context lines (``last=False``: join them);
    printed IR and its metadata notes are dropped, and a bare or cryptic message gets the
    exception's type."""
    lines = [ln.strip() for ln in str(err).strip().splitlines()
             if ln.strip() and not ln.strip().startswith(("# Metadata omitted", "==>"))]
    text = (lines[-1] if last else " ".join(lines)) if lines else ""
    # TVM's ICHECK text: "Check failed: pb->value != 0 (0 vs. 0) : Divide by zero" -> the reason
    text = re.sub(r"^.*Check failed: .*? : (?=\S)", "", text)
    # "In ir.Op(span=None, ..., name=\"relax.add\", ...), the first ..." -> "relax.add: the first
    # ..."
    text = re.sub(r'In ir\.Op\(.*?name="([\w.]+)".*?support_level=\d+\),\s*', r"\1: ", text)
    # any other printed op ("Size mismatch: ir.Op(span=None, ..., name=\"relax.dequantize\", ...")
    # -> its name; what follows a complete dump is kept, a truncated dump is dropped
    text = re.sub(r'ir\.Op\(.*?name="([\w.]+)"(?:.*?support_level=\d+\)|.*$)', r"\1", text)
    if len(text) > 300:
        text = text[:297] + "..."
    if not text or isinstance(err, (KeyError, IndexError, TypeError, AssertionError)) or \
            len(text) < 12:
        text = f"{type(err).__name__}{': ' + text if text else ''}"
    return text
