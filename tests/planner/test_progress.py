"""The progress bar on a terminal: its refresher thread stops while the process forks, so
what forks under a bar (tvmc on a terminal: the weights encoded ahead, a plan search asked for
two processes) still may, and the bar leaves no thread behind."""
import io
import sys
import threading
import time

from tests.helpers.fresh_process import in_fresh_process


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _search_under_a_bar() -> dict:
    """In a fresh process (its only thread its main one), on a stand-in terminal: what the
    fork guard and a forked child see under a shown bar, and what is left after it."""
    import multiprocessing

    from planner import progress, sink_walks
    from planner.forked import Forked

    # not under test here: the machine's load, and that this process is a pool's worker
    sink_walks._idle_cores = lambda: 2.0
    multiprocessing.parent_process = lambda: None
    sys.stderr = _Terminal()
    threads = threading.active_count()
    seen = {"threads before": threads, "may fork before": sink_walks.second_process_pays()}
    with progress.Progress(None, "planning", delay=0.05) as bar:
        time.sleep(0.3)                         # the bar is shown and refreshing
        seen["threads under the bar"] = threading.active_count()
        seen["may fork under the bar"] = sink_walks.second_process_pays()
        with Forked() as forked:
            forked.start(lambda: (progress.refresher_threads(), threading.active_count()))
            seen["child's refreshers, threads"] = forked.results()[0]
        seen["refreshers after the fork"] = progress.refresher_threads()
        time.sleep(0.6)
        bar.update(1)
        seen["bar's thread alive"] = bar._thread is not None and bar._thread.is_alive()
    seen["threads after"] = threading.active_count()
    seen["refreshers after"] = progress.refresher_threads()
    seen["shown"] = "planning" in sys.stderr.getvalue()
    return seen


def test_a_search_under_a_bar_still_forks_and_the_bar_leaves_no_thread():
    seen = in_fresh_process(_search_under_a_bar)
    assert seen["shown"]
    assert seen["threads under the bar"] == seen["threads before"] + 1
    # the bar's thread is not counted against forking: it stops for the fork
    assert seen["may fork under the bar"] is seen["may fork before"] is True
    assert seen["child's refreshers, threads"] == (0, 1)
    # and starts again after it, so the elapsed time keeps moving
    assert seen["refreshers after the fork"] == 1 and seen["bar's thread alive"]
    # no thread outlives the bar (tqdm's monitor thread among them)
    assert seen["threads after"] == seen["threads before"] and seen["refreshers after"] == 0


def test_another_thread_still_keeps_the_search_in_one_process(monkeypatch):
    from planner import progress, sink_walks
    monkeypatch.setattr(sink_walks, "_usable_cpus", lambda: 2)
    monkeypatch.setattr(sink_walks, "_idle_cores", lambda: 2.0)
    # threads this process already runs (a test runner's) are not this test's business
    runner, count = threading.active_count() - 1, threading.active_count
    monkeypatch.setattr(threading, "active_count", lambda: count() - runner)
    monkeypatch.setattr(sys, "stderr", _Terminal())
    stop = threading.Event()
    with progress.Progress(None, "planning", delay=0.0):
        assert sink_walks.second_process_pays()
        other = threading.Thread(target=stop.wait)
        other.start()
        try:
            assert not sink_walks.second_process_pays()
        finally:
            stop.set()
            other.join()
