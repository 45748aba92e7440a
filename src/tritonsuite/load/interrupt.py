"""The load's asyncio runs (on uvloop where it is installed), one that SIGTERM ends cleanly, and a bounded await that
never loses a cancellation.

The pytest plugin turns SIGTERM (a CI runner cancelling a job, a step's timeout) into KeyboardInterrupt so the run
ends like Ctrl-C and its report is written. Raised from a signal handler, that exception lands in whatever frame
runs at the moment: inside an asyncio task it leaves the task pending or its exception unread ("Task exception
was never retrieved" after pytest's summary, seen in CI). While a load generator runs, SIGTERM instead cancels the
run's task, every ``finally`` of the generator runs, and the KeyboardInterrupt is raised here once the loop has
ended. Where SIGTERM has no Python handler (a script using the library), it is left as it is.

Ctrl-C (and that SIGTERM) ends a run by cancelling its task, so every bounded await on the way must let the
cancellation through. ``asyncio.wait_for`` on Python 3.11 does not when what it waits for completes in the same turn
of the loop as the cancellation: it returns the result and the cancellation is lost (the point then ran to its
end; seen in CI, where the workers' 20 ms reports keep such awaits completing). :func:`within` is the bounded await
used everywhere instead: ``asyncio.timeout`` where there is one (3.11), which counts cancellations and lets a
pending one through.
"""
from __future__ import annotations

import asyncio
import signal
import sys
import threading


def run(coro):
    """``asyncio.run(coro)`` on uvloop's event loop where uvloop is installed (libuv's loop: less CPU per request
    than the standard loop, which is used otherwise and on Python 3.10)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    if sys.version_info < (3, 11):
        return asyncio.run(coro)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


def event_loop_name() -> str:
    """The event loop the load runs on, for a row's ``client_event_loop``: ``uvloop <version>`` or ``asyncio``."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return "none"
    if type(loop).__module__.startswith("uvloop"):
        import uvloop

        return f"uvloop {uvloop.__version__}"
    return "asyncio"


async def within(awaitable, seconds: float):
    """``await awaitable``, ``TimeoutError`` after ``seconds``; a cancellation is never swallowed (3.11 and later)."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await awaitable
    return await asyncio.wait_for(awaitable, seconds)  # Python 3.10: no asyncio.timeout


def run_interruptible(coro):
    """``asyncio.run(coro)``, SIGTERM (where it has a Python handler) and Ctrl-C (where it has Python's own) cancelling
    it, and KeyboardInterrupt raised after it has ended. Both are the loop's own signal handlers (delivered through
    its wake-up, as a callback of the loop), not asyncio.Runner's SIGINT handler: a Ctrl-C then never depends on
    when Python runs a signal handler while uvloop's C code waits."""
    if threading.current_thread() is not threading.main_thread():
        return run(coro)
    handled = {s: h for s, h in ((signal.SIGTERM, signal.getsignal(signal.SIGTERM)),
                                 (signal.SIGINT, signal.getsignal(signal.SIGINT)))
               if callable(h) and (s != signal.SIGINT or h is signal.default_int_handler)}
    if not handled:
        return run(coro)
    signalled: list[int] = []

    async def main():
        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        for signum in handled:
            loop.add_signal_handler(signum, lambda n=signum: (signalled.append(n), task.cancel()))
        try:
            return await coro
        finally:
            for signum, previous in handled.items():
                loop.remove_signal_handler(signum)
                signal.signal(signum, previous)  # asyncio leaves SIG_DFL behind: the plugin's and Python's again

    try:
        return run(main())
    except asyncio.CancelledError:
        if signalled:
            raise KeyboardInterrupt(f"interrupted by signal {signalled[0]}") from None
        raise


def _terminated(signum, frame):
    raise KeyboardInterrupt(f"terminated by signal {signum}")


def end_like_ctrl_c_on_sigterm() -> None:
    """SIGTERM (a CI runner cancelling a job, a step's timeout) ends the process like Ctrl-C, so servers are stopped
    and what was measured is reported; Python's default is to die on the spot. Only from the main thread, and only
    where nothing else handles SIGTERM."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminated)
