"""The cases of the front-door differential test: trained models, the builder's defective
models and semantic mutations of both, each judged by TFLite Micro and by ``load_model``.

A semantic mutation keeps the file a well-formed flatbuffer and changes what it says (a shape,
a type, a quantization parameter, an index, an operator code, an option): the cases where
"valid" is a question TFLite Micro can answer without tripping over damaged bytes.
"""
from __future__ import annotations

import random
import zlib
from dataclasses import dataclass

from tests.helpers.models import MODELS_DIR
from tests.helpers.tflite_oracle import runs
from tests.reliability.fuzz_harness import _message_problem
from tests.reliability.tflite_mutator import (
    builder_models,
    layout,
    m_const,
    m_index,
    m_opcode,
    m_options,
    m_quant,
    m_rank,
    m_shape,
    m_type,
)

TRAINED_DIR = MODELS_DIR / "tflite-micro"
#: TFLite Micro's trained models (their README gives provenance) and two shipped ones.
TRAINED = ("hello_world_int8", "micro_speech_quantized", "person_detect",
           "keyword_scrambled_8bit", "trained_lstm_int8", "person_detect_vela")
SHIPPED = ("ds_cnn_kws", "resnet8_cifar")
SEMANTIC = (m_quant, m_quant, m_shape, m_rank, m_type, m_index, m_opcode, m_options, m_const)


def seed_models() -> list[tuple[str, bytes]]:
    """The unmutated cases: trained models, shipped models, the builder's (with defects)."""
    out = [(n, (TRAINED_DIR / f"{n}.tflite").read_bytes()) for n in TRAINED
           if (TRAINED_DIR / f"{n}.tflite").exists()]
    out += [(n, (MODELS_DIR / f"{n}.tflite").read_bytes()) for n in SHIPPED
            if (MODELS_DIR / f"{n}.tflite").exists()]
    return out + builder_models()


def mutated(seeds: list[tuple[str, bytes]], n: int, campaign: int = 0
            ) -> list[tuple[str, bytes]]:
    """``n`` semantic mutations of the valid seeds, a pure function of ``campaign``."""
    valid = valid_seeds(seeds)
    layouts = {name: layout(data) for name, data in valid}
    return [mutation(valid, layouts, k, campaign) for k in range(n)]


def valid_seeds(seeds: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """The seeds :func:`mutated` mutates: the trained, shipped and builder models as they
    are (no defect, no ethos-u operator)."""
    return [(name, data) for name, data in seeds if "/" not in name and "vela" not in name]


def mutation(valid: list[tuple[str, bytes]], layouts: dict, k: int, campaign: int = 0
             ) -> tuple[str, bytes]:
    """Case ``k`` of :func:`mutated`'s ``campaign`` (``layouts``: each valid seed's
    ``layout``): its name (the seed and the mutation) and its bytes."""
    rng = random.Random(zlib.crc32(f"front-door {campaign} {k}".encode()))
    name, data = rng.choice(valid)
    fn = rng.choice(SEMANTIC)
    d, desc = fn(rng, bytearray(data), layouts[name])
    return f"{name} [{fn.__name__[2:]}: {desc}]", bytes(d)


@dataclass(frozen=True)
class Verdict:
    """``load_model``'s answer: ``validated`` (the check passed and TVM's importer was
    reached), ``imported`` or the error's class, and its message."""

    outcome: str
    message: str = ""


def front_door(data: bytes, full: bool) -> Verdict:
    """``load_model(data)``: up to TVM's converter (``full=False``, a stand-in raises at it), or
    through it."""
    import tvm.relax.frontend.tflite as tfl_frontend

    from tvm_ethos.errors import TvmEthosError
    from tvm_ethos.frontend import load_model

    class _Reached(BaseException):
        pass

    def stand_in(*_args, **_kwargs):
        raise _Reached()

    real = tfl_frontend.from_tflite
    if not full:
        tfl_frontend.from_tflite = stand_in
    try:
        load_model(data)
        return Verdict("imported")
    except _Reached:
        return Verdict("validated")
    except TvmEthosError as err:
        return Verdict(type(err).__name__, str(err))
    finally:
        tfl_frontend.from_tflite = real


def disagreement(tflm: str, ours: Verdict) -> str | None:
    """What is wrong with ``ours`` given TFLite Micro's verdict ``tflm``, or None: a model TFLite
    Micro runs is never called invalid (ModelLoadError), one it refuses is never imported, and
    every refusal is one clear line. Where TFLite Micro has no kernel for an operator, LiteRT's
    reference kernels judge instead (``tflite_oracle.runs``)."""
    if ours.message:
        problem = _message_problem(ours.message)
        if problem:
            return f"{problem}: {ours.message[:300]!r}"
    if runs(tflm) and ours.outcome == "ModelLoadError":
        return f"TFLite Micro runs it, load_model calls it invalid: {ours.message[:300]}"
    if not runs(tflm) and ours.outcome == "imported":
        return f"TFLite Micro refuses it ({tflm[:200]}), load_model imports it"
    return None
