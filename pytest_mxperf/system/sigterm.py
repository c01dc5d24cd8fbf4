"""SIGTERM as Ctrl-C for a paired run's controller: CI cancellation, ``timeout`` or ``docker
stop`` end the run through its clean-up (sides, fork servers, REV's worktree, temporary files),
and a process forked from the controller gets SIGTERM's default action back."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

#: The process whose SIGTERM `sigterm_as_interrupt` turns into KeyboardInterrupt.
_controller_pid = 0


def _interrupt(signum: int, frame: object) -> None:
    if os.getpid() != _controller_pid:
        # A child forked from the controller, signalled before `_default_sigterm_in_child`
        # ran (Pool.terminate right after the fork): it ends as SIGTERM ends a process.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    raise KeyboardInterrupt(f"signal {signum}")


def _default_sigterm_in_child() -> None:
    """A process forked from the controller while :func:`sigterm_as_interrupt` holds gets
    SIGTERM's default action back: the handler is the controller's, and a child that turns
    SIGTERM into KeyboardInterrupt may not end on it. A test body's ``gluon.data.DataLoader``
    with workers forks its pool here, and ``Pool.terminate`` SIGTERMs it: a worker that took the
    interrupt at the wrong point lived on, and the controller waited for it for ever. A signal
    that comes before this hook runs is the handler's: in a child it ends the process too."""
    if signal.getsignal(signal.SIGTERM) is _interrupt:
        with contextlib.suppress(ValueError):  # not the main thread: nothing to undo here
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


os.register_at_fork(after_in_child=_default_sigterm_in_child)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (CI cancellation, ``timeout``, ``docker stop``) ends the run as Ctrl-C does:
    its sides, fork servers, REV's worktree and temporary files are removed on the way out.
    Only where SIGTERM has its default action, in the main thread (the only one that may
    set a handler); the previous handler comes back on leaving."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return
    global _controller_pid
    _controller_pid = os.getpid()
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
