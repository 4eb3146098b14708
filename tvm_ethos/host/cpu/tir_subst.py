"""Substitution of variables in a TIR expression, for the schedules that rewrite loop nests by
hand (the x86 instruction forms, the CPU schedule's loop fission, the emulator's line buffers).
It reads the expressions those loop nests hold; any other raises
:class:`UnreadableExpression`, which each caller turns into its own refusal."""
from __future__ import annotations

from tvm import tirx

from tvm_ethos.errors import CompileError

#: the binary expressions :func:`subst` rebuilds from their substituted operands
BINARY = (tirx.Add, tirx.Sub, tirx.Mul, tirx.FloorDiv, tirx.FloorMod, tirx.Min, tirx.Max,
          tirx.And, tirx.Or, tirx.EQ, tirx.NE, tirx.LT, tirx.LE, tirx.GT, tirx.GE,
          tirx.Div, tirx.Mod)


class UnreadableExpression(CompileError):
    """A TIR expression :func:`subst` does not read."""


def subst(e, env: dict):
    """``e`` with the variables of ``env`` (keyed by the Var objects) replaced."""
    if isinstance(e, tirx.Var):
        for v, val in env.items():
            if e.same_as(v):
                return val
        return e
    if isinstance(e, (tirx.IntImm, tirx.FloatImm)):
        return e
    if isinstance(e, BINARY):
        return type(e)(subst(e.a, env), subst(e.b, env))
    if isinstance(e, tirx.Not):
        return tirx.Not(subst(e.a, env))
    if isinstance(e, tirx.Cast):
        return tirx.Cast(e.dtype, subst(e.value, env))
    if isinstance(e, tirx.Select):
        return tirx.Select(subst(e.condition, env), subst(e.true_value, env),
                           subst(e.false_value, env))
    raise UnreadableExpression(f"cannot rewrite {type(e).__name__} {e}")
