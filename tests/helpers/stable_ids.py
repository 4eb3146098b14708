"""Test ids must be the same in every process: pytest-xdist compares the ids its workers
collect and refuses to run the suite when they differ. A parameter's repr holding a memory
address (``<object object at 0x7f...>``) is the usual way an id comes out different."""
from __future__ import annotations

import re
from collections.abc import Iterable

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def ids_with_an_address(node_ids: Iterable[str]) -> list[str]:
    """The ids in ``node_ids`` that hold a memory address, in their order."""
    return [n for n in node_ids if _ADDRESS.search(n)]


def unstable_ids_error(unstable: list[str]) -> str:
    """One line naming the tests and the fix."""
    return (f"{len(unstable)} test id(s) hold a memory address, which differs in each process "
            f"(pytest-xdist then refuses to run), e.g. {unstable[0]}; give the parameter a fixed "
            "repr or pass an explicit id")
