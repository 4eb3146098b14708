"""Forked helper processes for the plan search: run callables in children that inherit the
parent's state (graph, caches) copy-on-write, read their results back in start order, and
make sure none outlives the search. POSIX only (``fork``); callers fall back to one process
where it is missing (``planner.sink_walks.second_process_pays``)."""
from __future__ import annotations

import multiprocessing
from typing import Any, Callable

from planner.errors import PlannerError
from planner.progress import paused_for_fork


def _run(fn: Callable, args: tuple, conn) -> None:
    try:
        conn.send(("ok", fn(*args)))
    except BaseException as e:       # noqa: BLE001 - handed to the parent, which raises it
        try:
            conn.send(("error", e))
        except Exception:            # an exception that does not pickle
            conn.send(("error", PlannerError(f"planner worker failed: {e!r}")))
    finally:
        conn.close()


class Forked:
    """``with Forked() as f: f.start(fn, *args); ...; f.results()``: each ``fn(*args)`` runs
    in a forked child (nothing is pickled on the way in; its result is pickled back, so keep
    it plain: ints, tuples, dicts). An exception in a child is raised by ``results``; leaving
    the block ends any child still running."""

    def __init__(self) -> None:
        self.ctx = multiprocessing.get_context("fork")
        self._children: list = []
        self._feeds: list = []
        self._streams: list = []

    def start(self, fn: Callable, *args: Any) -> None:
        recv, send = self.ctx.Pipe(duplex=False)
        proc = self.ctx.Process(target=_run, args=(fn, args, send), daemon=True)
        with paused_for_fork():     # a progress bar's thread holds no lock the child copies
            proc.start()
        send.close()
        self._children.append((proc, recv))

    def start_fed(self, fn: Callable, *args: Any):
        """Like ``start``, but ``fn`` gets one more argument, an inbox whose ``recv()``
        returns what the parent sends on the connection returned here."""
        inbox, feed = self.ctx.Pipe(duplex=False)
        self.start(fn, *args, inbox)
        inbox.close()
        self._feeds.append(feed)
        return feed

    def start_streamed(self, fn: Callable, *args: Any):
        """Like ``start``, but ``fn`` gets one more argument, an outbox whose ``send()``
        the parent reads, in order, from the connection returned here, while the child
        runs. Once the child has ended, reading it raises EOFError."""
        stream, outbox = self.ctx.Pipe(duplex=False)
        self.start(fn, *args, outbox)
        outbox.close()
        self._streams.append(stream)
        return stream

    @staticmethod
    def send(feed, message: Any) -> None:
        """Send ``message`` to a child started with ``start_fed``. A child that has already
        stopped (failed or died) is not written to: ``results`` reports why it stopped."""
        try:
            feed.send(message)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def results(self) -> list:
        """Each child's result, in start order (waits for them)."""
        out = []
        for _, recv in self._children:
            try:
                status, payload = recv.recv()
            except EOFError:
                raise PlannerError("a planner worker process died without a result; run "
                                   "the search with workers=1") from None
            if status != "ok":
                raise payload
            out.append(payload)
        return out

    def __enter__(self) -> "Forked":
        return self

    def __exit__(self, *exc) -> None:
        for proc, recv in self._children:    # done (its result read) or no longer wanted
            if proc.is_alive():
                proc.terminate()
            proc.join()
            recv.close()
        for conn in self._feeds + self._streams:
            conn.close()
        self._children, self._feeds, self._streams = [], [], []
