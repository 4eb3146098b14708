"""``--planner-<field>=VALUE``: the one command-line spelling of every PlannerOptions field.

``python -m planner`` and ``tvmc plan`` / ``tvmc compile`` build their planner flags here, so
that the three accept the same options with the same help lines and read values the same way.
"""
from __future__ import annotations

import argparse
from dataclasses import fields
from typing import Mapping

from planner.errors import PlannerError
from planner.options import PlannerOptionError, PlannerOptions

_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def flag(name: str) -> str:
    """The flag of a PlannerOptions field (``--planner-max_plan_size``)."""
    return f"--planner-{name}"


def _dest(name: str) -> str:
    return f"planner__{name}"


def show(value) -> str:
    """A value as the command line writes it (``1,0``, ``none``, ``true``)."""
    if isinstance(value, tuple):
        return ",".join(map(str, value)) if value else "none"
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def add_arguments(parser: argparse.ArgumentParser,
                  notes: Mapping[str, str] | None = None) -> None:
    """One ``--planner-<field>`` per PlannerOptions field; ``notes`` adds a front end's own
    words to a field's help (what ``tvmc compile`` accepts of it)."""
    group = parser.add_argument_group("planner options (planner.options.PlannerOptions)")
    for f in fields(PlannerOptions):
        text = f"{f.metadata['help']}; default {show(f.default)}"
        if notes and f.name in notes:
            text += f"; {notes[f.name]}"
        group.add_argument(flag(f.name), dest=_dest(f.name), default=None, metavar="VALUE",
                           help=text.replace("%", "%%"))


def _read(default, text: str):
    """``text`` as a value of the type of a field whose default is ``default``; the string
    itself where it reads as none (PlannerOptions then names what the field allows)."""
    low = text.strip().lower()
    if isinstance(default, tuple):
        if low in ("", "none"):
            return ()
        items = [v.strip() for v in text.split(",")]
        return tuple(int(v) if v.lstrip("-").isdigit() else v for v in items)
    if low == "none":
        return None
    if low in _TRUE + _FALSE and (isinstance(default, (bool, str))):
        return low in _TRUE
    if low.lstrip("-").isdigit():
        return int(low)
    return text


def options_from_args(args: argparse.Namespace) -> dict:
    """The ``--planner-*`` values given, read and validated: ``{field: value}``.

    A bad value raises PlannerOptionError whose message names the flag as typed."""
    out = {}
    for f in fields(PlannerOptions):
        text = getattr(args, _dest(f.name), None)
        if text is not None:
            out[f.name] = _read(f.default, text)
    try:
        PlannerOptions(**out)
    except PlannerOptionError as err:
        raise FlagError(err.option, err.value, err.allowed) from None
    return out


class FlagError(PlannerOptionError):
    """A ``--planner-<field>`` value PlannerOptions refuses, in the command line's words."""

    def __init__(self, option: str, value, allowed: str) -> None:
        super().__init__(option, value, allowed)
        PlannerError.__init__(self, f"{flag(option)}={value!r} is invalid; allowed: "
                                    f"{allowed}")
