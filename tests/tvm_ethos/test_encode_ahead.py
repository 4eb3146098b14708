"""The largest weight encodings done ahead by a forked child: the bytes of one process
whatever the child does (encodes what was predicted, was predicted wrong, dies, raises), and
one process where the fork guard says no."""
import multiprocessing
import os
import threading

import numpy as np
import pytest

from tests.helpers.fresh_process import in_fresh_process

pytest.importorskip("ethosu.vela")

# The tests that fork run it in a fresh process (tests/helpers/fresh_process.py): forking is
# safe only from a process without other threads.


def _requests(seed: int, n: int) -> list:
    """``n`` EncodeRequests of random weights, block depths and kinds."""
    from tvm_ethos.backends.ethos_u.encode_ahead import EncodeRequest
    from tvm_ethos.backends.ethos_u.stream_base import npu_accelerator, vela_api
    api = vela_api()
    acc = npu_accelerator("ethos-u55-128")
    rng = np.random.RandomState(seed)
    out = []
    for _ in range(n):
        o, kh, kw, i = rng.randint(1, 65), rng.randint(1, 4), rng.randint(1, 4), \
            rng.randint(1, 80)
        depthwise = bool(rng.randint(2))
        w = rng.randint(-255, 256, (o, kh, kw, 1 if depthwise else i)).astype(np.int16)
        out.append(EncodeRequest(acc, w, (1, 1), 8, int(rng.choice([8, 16, 32])), depthwise,
                                 api.NpuBlockTraversal.DEPTH_FIRST))
    return out


def _asked(requests) -> list[bytes]:
    """What an emission gets asking for ``requests`` through the one door."""
    from tvm_ethos.backends.ethos_u.encode_ahead import encode_weights
    return [encode_weights(r.accelerator, r.weights, r.dilation, r.ifm_bits, r.block_depth,
                           r.depthwise, r.traversal) for r in requests]


def _ahead(child: str) -> tuple:
    """The encodings of 12 requests with a child that ``child``s: "encodes" the largest 4
    of them, "is wrong" (encodes 4 others), "dies" or "raises" at its first; with whether
    the bytes are those of one process, (predicted, taken), the error raised and the
    threads and children left."""
    from tvm_ethos.backends.ethos_u import encode_ahead
    requests = _requests(0, 12)
    inline = [r.encode() for r in requests]
    predicted = sorted(requests, key=lambda r: -r.weights.size)[:4]
    if child == "is wrong":
        predicted = _requests(1, 4)
    elif child == "dies":
        encode_ahead._child = lambda rs, outbox: os._exit(3)
    elif child == "raises":
        def failing(rs, outbox):
            raise ValueError("child failed on purpose")
        encode_ahead._child = failing
    encode_ahead.TAKEN = log = []
    threads = threading.active_count()
    got, error = None, None
    try:
        with encode_ahead.encoding_ahead(predicted):
            got = _asked(requests)
    except Exception as e:    # noqa: BLE001 - handed to the test, which names what it wants
        error = f"{type(e).__name__}: {e}"
    left = threading.active_count() - threads, len(multiprocessing.active_children())
    return got == inline, log, error, left


def _every_child() -> dict:
    from tvm_ethos.backends.ethos_u import encode_ahead
    child = encode_ahead._child
    out = {}
    for kind in ("encodes", "is wrong", "dies", "raises"):
        encode_ahead._child = child
        out[kind] = _ahead(kind)
    encode_ahead._child = child
    out["asked twice"] = _asked_twice()
    return out


@pytest.fixture(scope="module")
def children() -> dict:
    """``_ahead`` for every child, and ``_asked_twice``, in one fresh process (each start
    costs a second)."""
    return in_fresh_process(_every_child)


@pytest.mark.parametrize("child", ["encodes", "is wrong", "dies", "raises"])
def test_the_bytes_are_one_process_s_whatever_the_child_does(children, child):
    same, log, error, left = children[child]
    assert error is None and same and left == (0, 0)
    ((predicted, taken),) = log
    assert predicted == 4
    assert taken == (4 if child == "encodes" else 0)


def test_a_prediction_asked_for_twice_is_encoded_here_the_second_time(children):
    """Two equal requests: the child's bytes are taken once, and the other encoded here."""
    same, log = children["asked twice"]
    assert same and log == [(1, 1)]


def _asked_twice() -> tuple:
    from tvm_ethos.backends.ethos_u import encode_ahead
    (r,) = _requests(2, 1)
    encode_ahead.TAKEN = log = []
    with encode_ahead.encoding_ahead([r]):
        got = _asked([r, r])
    return got == [r.encode()] * 2, log


def test_equal_requests_have_equal_digests_and_any_difference_changes_it():
    a, b = _requests(3, 2)
    same = type(a)(a.accelerator, a.weights.copy(), a.dilation, a.ifm_bits, a.block_depth,
                   a.depthwise, a.traversal)
    assert a.digest() == same.digest() != b.digest()
    other_depth = type(a)(a.accelerator, a.weights, a.dilation, a.ifm_bits,
                          a.block_depth * 2, a.depthwise, a.traversal)
    flipped = a.weights.copy()
    flipped.flat[0] += 1
    other_weight = type(a)(a.accelerator, flipped, a.dilation, a.ifm_bits, a.block_depth,
                           a.depthwise, a.traversal)
    assert len({a.digest(), other_depth.digest(), other_weight.digest()}) == 3


def _large(n: int, weights: int) -> list:
    from tvm_ethos.backends.ethos_u.encode_ahead import EncodeRequest
    return [EncodeRequest(None, np.zeros((weights + k, 1, 1, 1), np.int16), (1, 1), 8, 16,
                          False, None) for k in range(n)]


def test_worth_ahead_takes_the_large_requests_largest_first(monkeypatch):
    from tvm_ethos.backends.ethos_u import encode_ahead
    monkeypatch.setattr(encode_ahead, "second_process_pays", lambda: True)
    small = _large(3, encode_ahead.AHEAD_MIN_REQUEST // 2)
    large = _large(3, encode_ahead.AHEAD_MIN_WEIGHTS)
    chosen = encode_ahead.worth_ahead(small[:1] + large[:1] + small[1:] + large[1:])
    assert [r.weights.size for r in chosen] == sorted((r.weights.size for r in large),
                                                      reverse=True)


@pytest.mark.parametrize("why", ["no second process", "too few weights"])
def test_the_guard_s_no_encodes_everything_here(monkeypatch, why):
    from tvm_ethos.backends.ethos_u import encode_ahead
    monkeypatch.setattr(encode_ahead, "second_process_pays", lambda: why == "too few weights")
    size = encode_ahead.AHEAD_MIN_REQUEST
    requests = _large(1, size) if why == "too few weights" else \
        _large(2, encode_ahead.AHEAD_MIN_WEIGHTS)
    assert sum(r.weights.size for r in requests) < encode_ahead.AHEAD_MIN_WEIGHTS or \
        why == "no second process"
    chosen = encode_ahead.worth_ahead(requests)
    assert chosen == []
    monkeypatch.setattr(encode_ahead, "TAKEN", [])
    small = _requests(4, 3)
    with encode_ahead.encoding_ahead(chosen):      # no child: nothing forked or taken
        assert multiprocessing.active_children() == []
        assert _asked(small) == [r.encode() for r in small]
    assert encode_ahead.TAKEN == []


def _model_both_ways(name: str) -> tuple:
    """(the .tflite compiled with everything encoded here, compiled with the child forced
    on, [(predicted, taken)] of the second)."""
    import tvm_ethos
    from tests.helpers.models import model_path
    from tvm_ethos.backends.ethos_u import encode_ahead
    data = model_path(name).read_bytes()
    out = []
    for ahead in (False, True):
        encode_ahead.second_process_pays = lambda ahead=ahead: ahead
        encode_ahead.TAKEN = log = []
        out.append(tvm_ethos.compile_tflite(data, "ethos-u",
                                            accelerator_config="ethos-u55-128").tflite)
    return out[0], out[1], log


@pytest.mark.slow
def test_mobilenet_s_predictions_are_the_encodings_its_emission_asks_for():
    """The plan's predictions (``_Emitter.predicted_requests``) are what the emission asks:
    every one is taken from the child, and the file is the one-process file."""
    inline, ahead, log = in_fresh_process(_model_both_ways, "mobilenet_v1_1.0_224")
    assert ahead == inline
    ((predicted, taken),) = log
    assert predicted >= 1 and taken == predicted
