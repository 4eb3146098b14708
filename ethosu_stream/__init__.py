"""A functional model of the Arm Ethos-U55/U65 register command stream (TVM-free, numpy).

It decodes the 32-bit command words a driver would hand to the NPU, keeps the register
state they set, and executes each operation on numpy copies of the memory regions, so a
stream can be checked for bit-exact outputs without hardware. Register names and opcodes
come from the definitions Vela ships (the ``vela`` extra), not from a copy here.
"""
from .errors import StreamError
from .memory import Memory
from .registers import Command, RegisterState, decode_stream
from .run import StreamStats, run_stream

__all__ = ["Command", "Memory", "RegisterState", "StreamError", "StreamStats",
           "decode_stream", "run_stream"]
