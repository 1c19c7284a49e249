"""A session asked to stop is seen in its long synchronous steps too, not only at its next await.

Ctrl-C, and SIGTERM turned into it (cli.py), reach asyncio.run's handler, which cancels the session's
task; a cancellation lands at the task's next await. Embedding a cold corpus, or searching its
neighbours, runs for seconds without one, so the signal waited for the step to end (issue 54). Those
steps call check() between small units of work (a few texts, a block of rows): once the task is
cancelled, or the session's interrupt is set (ReviewOptions.interrupt: the daemon's SIGTERM), it raises
Interrupted there, which unwinds the session as the cancellation would have, and the step keeps what it
finished (the vectors embedded so far are stored). ReviewOptions.stop alone (nothing new offered, decided
changes still applied) does not interrupt a step.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

# ReviewOptions.interrupt (the daemon's SIGTERM sets it), read by the session the daemon runs in another thread.
_STOP: ContextVar[threading.Event | None] = ContextVar("knomit_judge_stop", default=None)
# The session's own task, the one asyncio.run's SIGINT handler cancels: a worker task's cancelling is its own
# business (asyncio.timeout cancels a judge call's task), not a stop.
_SESSION: ContextVar[asyncio.Task[object] | None] = ContextVar("knomit_judge_session", default=None)


class Interrupted(asyncio.CancelledError):
    """A stop was asked (a signal, the daemon's SIGTERM) and a long step saw it: the session unwinds as cancelled.

    A CancelledError, so asyncio.run treats it as the cancellation its own SIGINT handler asked for (and raises
    KeyboardInterrupt after it), and no `except Exception` on the way swallows it.
    """


@contextmanager
def watching(stop: threading.Event | None) -> Iterator[None]:
    """Within this block (in this task or thread, and tasks started in it), check() also raises once `stop` is set."""
    token = _STOP.set(stop)
    try:
        yield
    finally:
        _STOP.reset(token)


def session_task() -> None:
    """Name the running task as the session's (the first thing the session does): the tasks it starts see it."""
    _SESSION.set(asyncio.current_task())


def watcher() -> Callable[[], bool]:
    """Whether the session running here was asked to stop (its task cancelled, or its interrupt set), as a
    function that worker threads may call: they have neither the task nor the interrupt of their own."""
    stop = _STOP.get()
    try:
        task = _SESSION.get() or asyncio.current_task()
    # no event loop here (rebuild, a plain call): Ctrl-C raises KeyboardInterrupt by itself
    except RuntimeError:
        task = None
    return lambda: (stop is not None and stop.is_set()) or (task is not None and task.cancelling() > 0)


def check() -> None:
    """Raise Interrupted if the session running here was asked to stop."""
    if watcher()():
        raise Interrupted()
