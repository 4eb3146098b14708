"""Device payloads in the runtime: how a backend's own device code for an NPU subgraph (an
Ethos-U command stream) is saved in ``program.json``, read back and run.

The runtime knows no backend: a backend that makes payloads registers one
:class:`PayloadFormat` when it is imported (the backend registry imports every built-in
backend), and the program reader and the executor ask for the format here. A payload is
saved as its format's JSON object, with no format name in it; a reader with several formats
registered takes the one whose fields cover the object's keys.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tvm_ethos.errors import TvmEthosError
from tvm_ethos.schema import Node


@dataclass(frozen=True)
class PayloadFormat:
    """One backend's payload type, its JSON form and how it runs.

    ``to_json`` gives a JSON-able dict whose keys are among ``fields``; ``from_json`` reads
    that dict back (checking it, a :class:`~tvm_ethos.schema.SchemaError` naming what is
    wrong); ``run(payload, inputs)`` computes the outputs from the activation inputs, in the
    payload's input and output order."""

    name: str
    payload_type: type
    fields: tuple[str, ...]
    to_json: Callable[[object], dict]
    from_json: Callable[[Node], object]
    run: Callable[[object, Sequence[np.ndarray]], list[np.ndarray]]


_FORMATS: list[PayloadFormat] = []


def register_payload_format(fmt: PayloadFormat) -> None:
    """Let the runtime save, read and run ``fmt``'s payloads (once per name; registering the
    same format again changes nothing)."""
    for i, have in enumerate(_FORMATS):
        if have.name == fmt.name:
            _FORMATS[i] = fmt
            return
    _FORMATS.append(fmt)


def format_of(payload: object) -> PayloadFormat:
    """The registered format of ``payload`` (by its type)."""
    for fmt in _FORMATS:
        if isinstance(payload, fmt.payload_type):
            return fmt
    raise TvmEthosError(
        f"no payload format is registered for {type(payload).__name__}; the backend that made "
        "it registers one when imported (tvm_ethos.runtime.payloads.register_payload_format)")


def payload_to_json(payload: object) -> dict:
    return format_of(payload).to_json(payload)


def payload_from_json(node: Node) -> object:
    """A payload read from its JSON object by the registered format that reads it."""
    node.obj()
    if len(_FORMATS) == 1:
        return _FORMATS[0].from_json(node)
    keys = set(node.value)
    for fmt in _FORMATS:
        if keys <= set(fmt.fields):
            return fmt.from_json(node)
    names = ", ".join(f.name for f in _FORMATS) or "none"
    raise node.error(f"a device payload no registered backend reads (formats registered: "
                     f"{names}); load the backend that compiled the model (tvm_ethos.backends."
                     "registry.get_registry() imports the built-in ones)")


def run_payload(payload: object, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The outputs of ``payload`` run on ``inputs`` by its format."""
    return format_of(payload).run(payload, inputs)
