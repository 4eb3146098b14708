"""Vela's block-search answers kept for one stream generation (``stream_memo``): an equal
question is asked of Vela once, a different one again, nothing is kept past the generation,
and a compiled file is the same without the memo."""
import pytest

from tests.helpers.models import model_path
from tvm_ethos.backends.ethos_u import npu_ops, stream_memo
from tvm_ethos.backends.ethos_u.npu_ops import FmSlot, legal_blocks
from tvm_ethos.backends.ethos_u.stream_base import npu_accelerator, vela_api
from tvm_ethos.backends.ethos_u.stream_cascade import identity_copy

pytest.importorskip("ethosu.vela")

ACCEL = "ethos-u55-128"


def _copy(h: int, w: int, c: int, at: int = 0):
    """An identity copy of an h x w x c int8 map from offset ``at`` (a pooling operation)."""
    return identity_copy(FmSlot(1, at, (h, w, c), "int8", None, 0),
                         FmSlot(1, at + 4096, (h, w, c), "int8", None, 0), "test")


@pytest.fixture
def vela_searches(monkeypatch):
    """How many times Vela's block search runs (a list of the operations it was asked for)."""
    api = vela_api()
    asked = []
    real = api.npu_find_block_configs

    def counted(op, accelerator):
        asked.append(op)
        return real(op, accelerator)

    monkeypatch.setattr(api, "npu_find_block_configs", counted)
    return asked


def test_an_equal_question_is_asked_once_a_different_one_again(vela_searches):
    acc = npu_accelerator(ACCEL)
    with stream_memo.generating() as memo:
        first = legal_blocks(_copy(8, 8, 16), acc)
        again = legal_blocks(_copy(8, 8, 16, at=512), acc)   # the same shapes elsewhere
        assert len(vela_searches) == 1 and memo.asked == 1
        other = legal_blocks(_copy(4, 8, 16), acc)
        assert len(vela_searches) == 2 and memo.asked == 2
    key = lambda c: (c.height, c.width, c.depth)  # noqa: E731
    assert [key(c) for c in first] == [key(c) for c in again]
    assert max(c.height for c in other) <= 4 < max(c.height for c in first)


def test_nothing_is_kept_past_a_generation(vela_searches):
    """Each generation (one compile's stream) starts empty; outside one Vela is asked every
    time, and a generation inside another shares its memo."""
    acc = npu_accelerator(ACCEL)
    with stream_memo.generating() as memo:
        legal_blocks(_copy(8, 8, 16), acc)
        with stream_memo.generating() as inner:
            assert inner is memo
            legal_blocks(_copy(8, 8, 16), acc)
    assert stream_memo.current() is None and len(vela_searches) == 1
    with stream_memo.generating() as later:
        assert later is not memo and later.answers == {}
        legal_blocks(_copy(8, 8, 16), acc)
    assert len(vela_searches) == 2
    legal_blocks(_copy(8, 8, 16), acc)
    legal_blocks(_copy(8, 8, 16), acc)
    assert len(vela_searches) == 4


def test_the_file_is_the_same_without_the_memo(vela_searches, monkeypatch):
    """resnet8 compiled with the memo, then with every question asked of Vela: the same
    bytes, from fewer searches."""
    import tvm_ethos

    data = model_path("resnet8_cifar").read_bytes()
    with_memo = tvm_ethos.compile_tflite(data, "ethos-u", accelerator_config=ACCEL).tflite
    searched = len(vela_searches)
    monkeypatch.setattr(npu_ops, "remembered", lambda table, key, ask: ask())
    without = tvm_ethos.compile_tflite(data, "ethos-u", accelerator_config=ACCEL).tflite
    assert with_memo == without
    assert 0 < searched < len(vela_searches) - searched
