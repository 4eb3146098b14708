"""The objects alive before a stage stay out of the collector's passes during it
(``frozen_heap``): frozen in the block, unfrozen after it (an error included), the stage's
own cyclic garbage still collected, and a host's own freeze left alone."""
import gc
import weakref

import pytest

from tvm_ethos.pipeline.frozen_heap import frozen_heap


class _Node:
    def __init__(self):
        self.me = self     # a cycle: only the cyclic collector frees it


@pytest.fixture(autouse=True)
def _unfrozen():
    assert gc.get_freeze_count() == 0
    yield
    gc.unfreeze()


def test_alive_before_frozen_within_unfrozen_after():
    before = _Node()
    with frozen_heap():
        assert gc.get_freeze_count() > 0
        assert not any(o is before for o in gc.get_objects())
    assert gc.get_freeze_count() == 0 and any(o is before for o in gc.get_objects())


def test_garbage_made_within_is_collected_within():
    with frozen_heap():
        made = weakref.ref(_Node())
        gc.collect()
        assert made() is None


def test_an_error_unfreezes():
    with pytest.raises(ValueError), frozen_heap():
        raise ValueError("stage failed")
    assert gc.get_freeze_count() == 0


def test_a_host_s_freeze_is_left_alone():
    gc.freeze()
    frozen = gc.get_freeze_count()
    with frozen_heap():
        pass
    assert gc.get_freeze_count() == frozen
