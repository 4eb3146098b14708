"""Where each ``ethos-u`` operator's stretch of the shared scratch arena starts.

Every stream addresses its IFMs and OFMs at fixed offsets in its own stretch, and TFLite Micro
gives a tensor one place in the arena. A tensor one ethos-u operator writes and another reads
must therefore sit at the same address in both stretches, which fixes the second stretch's
start: the stretches overlap. That is sound only while nothing still needed lies where the
stretch is written: at the time each of its IFMs is written (by a TFLite operator, or before
the run for a graph input) and while the operator itself runs. An IFM read again after its
operator (a model input that a TFLite operator or a later ethos-u operator reads too) must
lie where the operator's stream writes nothing: where the stream's written spans are known
(``NpuStep.writes``) that is checked, else the stream is taken to write its whole stretch;
so is a variable tensor (an SVDF's or LSTM's state, live from one invocation to the next)
that a stretch covers and does not write, and any tensor the stretch of an operator with
a state covers and does not write.
An operator none of whose IFMs is placed yet starts at the lowest offset where that holds
(the stretch of an operator whose results are all consumed is free again), fresh space after
every stretch at the latest. A layout that breaks the rule is refused by name rather than
written as a file whose operators overwrite each other's data.
"""
from __future__ import annotations

from typing import NamedTuple

from tvm_ethos.errors import UnsupportedModelError

#: where a stretch starts (the streams' own alignment)
ALIGN = 16


class LayoutRefusal(UnsupportedModelError):
    """No place in the arena for ethos-u operator ``operator``'s stretch (a writer may then
    form that operator's group otherwise)."""

    def __init__(self, message: str, operator: str):
        super().__init__(message)
        self.operator = operator


class InputOverwritten(LayoutRefusal):
    """An ethos-u operator's stream writes over an input that is read again after it (a
    writer may split its group so that each stream leaves the input intact)."""


class Slot(NamedTuple):
    """A boundary tensor of an ethos-u operator: source tensor, offset in its stretch, bytes."""

    tensor: int
    offset: int
    nbytes: int


class NpuStep(NamedTuple):
    """An ethos-u operator; ``writes``: the [lo, hi) spans of its stretch its stream writes
    (``stream_run.arena_writes``), None where they are not known (anywhere in it)."""

    name: str
    ifms: tuple[Slot, ...]
    ofms: tuple[Slot, ...]
    scratch_bytes: int
    writes: tuple[tuple[int, int], ...] | None = None


class CpuStep(NamedTuple):
    reads: tuple[int, ...]
    writes: tuple[int, ...]


def arena_bases(steps: list, outputs: set[int], names: dict[int, str],
                persistent: frozenset[int] = frozenset()) -> dict[str, int]:
    """The start of each NPU step's stretch (``steps``: NpuStep / CpuStep in execution order;
    ``outputs``: the graph's output tensors, live to the end; ``names``: tensor names for
    the refusal; ``persistent``: variable tensors, an LSTM's state that an ethos-u operator
    updates in place and finds again at the next invocation, so live from before the first
    step to after the last), all >= 0 and ALIGN-aligned."""
    written: dict[int, int] = {}
    last_read: dict[int, int] = {}
    for k, s in enumerate(steps):
        ins, outs = ((tuple(x.tensor for x in s.ifms), tuple(x.tensor for x in s.ofms))
                     if isinstance(s, NpuStep) else (s.reads, s.writes))
        for t in outs:
            written.setdefault(t, k)
        for t in ins:
            last_read[t] = k
    for t in outputs:
        last_read[t] = len(steps)
    for t in persistent:
        written[t], last_read[t] = -1, len(steps)
    placed: dict[int, tuple[int, int]] = {}   # tensor -> (address, bytes)
    stretches: dict[str, tuple[int, int, int]] = {}   # name -> (base, bytes, step)
    end = 0
    for k, s in enumerate(steps):
        if not isinstance(s, NpuStep):
            continue
        implied = {placed[x.tensor][0] - x.offset for x in s.ifms if x.tensor in placed}
        if len(implied) > 1:
            raise LayoutRefusal(
                f"ethos-u operator {s.name} reads tensors that earlier ethos-u operators placed "
                "at offsets its stream cannot reach together; the model cannot be written",
                s.name)
        if implied:
            base = implied.pop()
            if base % ALIGN:
                held = ", ".join(repr(names.get(x.tensor, x.tensor)) for x in s.ifms
                                 if x.tensor in placed)
                raise LayoutRefusal(
                    f"ethos-u operator {s.name} would start at arena offset {base}, which is "
                    f"not {ALIGN}-aligned: its stream reads {held} at an offset that differs "
                    f"by {base % ALIGN} (mod {ALIGN}) from where an earlier ethos-u operator "
                    "placed it; the model cannot be written", s.name)
            _check(placed, written, last_read, stretches, names, s, k, base, persistent)
        else:   # the lowest start where nothing still needed is in the way (fresh space last)
            top = _up(end)
            candidates = sorted({0, top} | {_up(a + n) for a, n in placed.values()}
                                | {_up(b + n) for b, n, _ in stretches.values()})
            for base in [c for c in candidates if c <= top]:
                try:
                    _check(placed, written, last_read, stretches, names, s, k, base,
                           persistent)
                    break
                except UnsupportedModelError:
                    if base == top:
                        raise
        for x in s.ifms + s.ofms:
            placed.setdefault(x.tensor, (base + x.offset, x.nbytes))
        stretches[s.name] = (base, s.scratch_bytes, k)
        end = max(end, base + s.scratch_bytes)
    low = min((b for b, _, _ in stretches.values()), default=0)
    shift = -(-max(0, -low) // ALIGN) * ALIGN
    return {name: b + shift for name, (b, _, _) in stretches.items()}


def _up(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _check(placed, written, last_read, stretches, names, step, k, base,
           persistent=frozenset()) -> None:
    """Refuses ``step`` starting at ``base`` where it would overwrite what is still needed."""
    for x in step.ifms:
        if x.tensor not in placed:
            _check_input(placed, written, last_read, stretches, step.name, names, x,
                         base + x.offset, written.get(x.tensor, -1))
    _check_stream(placed, written, last_read, step, k, base, names, persistent)


def _overlap(a: int, n: int, b: int, m: int) -> bool:
    return a < b + m and b < a + n


def _live(t: int, when: int, written: dict, last_read: dict) -> bool:
    """Whether ``t`` is written by step ``when`` or earlier and read by it or later (what a
    step reads must not share bytes with what it writes)."""
    return written.get(t, -1) <= when <= last_read.get(t, -1)


def _check_input(placed, written, last_read, stretches, name, names, slot, address,
                 when) -> None:
    """An IFM written at step ``when`` (-1: a graph input) at ``address``: nothing placed
    there may still be needed then, and no stretch running before its operator may cover
    it."""
    label = names.get(slot.tensor, slot.tensor)
    for t, (a, n) in placed.items():
        if t != slot.tensor and _live(t, when, written, last_read) and \
                _overlap(a, n, address, slot.nbytes):
            raise LayoutRefusal(
                f"ethos-u operator {name}: its input {label!r} would overwrite tensor "
                f"{names.get(t, t)!r} while it is still to be read; the model cannot be "
                "written", name)
    for other, (b, n, k) in stretches.items():
        if when < k and _overlap(b, n, address, slot.nbytes):
            raise LayoutRefusal(
                f"ethos-u operator {name}: its input {label!r} would be overwritten by "
                f"ethos-u operator {other}, which runs before it; the model cannot be written",
                name)


def _overwritten(writes, slot: Slot) -> bool:
    """Whether a stream that writes ``writes`` (None: anywhere) may write ``slot``'s bytes."""
    return writes is None or any(_overlap(lo, hi - lo, slot.offset, slot.nbytes)
                                 for lo, hi in writes)


def _check_stream(placed, written, last_read, step, k, base, names,
                  persistent=frozenset()) -> None:
    """While step ``k`` runs, its stream writes anywhere in its stretch: no tensor still to
    be read after it may lie there, its own IFMs included (but a persistent one, which its
    stream updates in place; and where the stream's written spans are known and miss it,
    another operator's persistent one, or any tensor where the step has a state of its own:
    an SVDF's stretch reaches over the states and tensors of the chain before it)."""
    mine = {x.tensor for x in step.ifms + step.ofms}
    for x in step.ifms:
        if last_read.get(x.tensor, -1) > k and x.tensor not in persistent and \
                _overwritten(step.writes, x):
            label = names.get(x.tensor, x.tensor)
            how = ("its stream may reuse that place" if step.writes is None else
                   "its stream writes over it once its own operations have read it")
            raise InputOverwritten(
                f"ethos-u operator {step.name}: its input {label!r} is read again after it, "
                f"and {how}; the model cannot be written", step.name)
    for t, (a, n) in placed.items():
        if t not in mine and _live(t, k, written, last_read) and last_read.get(t, -1) > k \
                and _overlap(a, n, base, step.scratch_bytes) and not (
                    (t in persistent or mine & persistent) and step.writes is not None
                    and not _overwritten(step.writes, Slot(t, a - base, n))):
            raise LayoutRefusal(
                f"ethos-u operator {step.name}: its stream would overwrite tensor "
                f"{names.get(t, t)!r} while it is still to be read; the model cannot be "
                "written", step.name)
