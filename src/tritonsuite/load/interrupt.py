"""An asyncio run that SIGTERM ends cleanly.

The pytest plugin turns SIGTERM (a CI runner cancelling a job, a step's timeout) into KeyboardInterrupt so the run
ends like Ctrl-C and its report is written. Raised from a signal handler, that exception lands in whatever frame
runs at the moment: inside an asyncio task it leaves the task pending or its exception unread ("Task exception
was never retrieved" after pytest's summary, seen in CI). While a load generator runs, SIGTERM instead cancels the
run's task, every ``finally`` of the generator runs, and the KeyboardInterrupt is raised here once the loop has
ended. Where SIGTERM has no Python handler (a script using the library), it is left as it is.
"""
from __future__ import annotations

import asyncio
import signal
import threading


def run_interruptible(coro):
    """``asyncio.run(coro)``, SIGTERM cancelling it and raising KeyboardInterrupt after it has ended."""
    previous = signal.getsignal(signal.SIGTERM)
    if not callable(previous) or threading.current_thread() is not threading.main_thread():
        return asyncio.run(coro)
    signalled: list[int] = []

    async def main():
        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        loop.add_signal_handler(signal.SIGTERM, lambda: (signalled.append(signal.SIGTERM), task.cancel()))
        try:
            return await coro
        finally:
            loop.remove_signal_handler(signal.SIGTERM)
            signal.signal(signal.SIGTERM, previous)  # asyncio leaves SIG_DFL behind: the plugin's handler again

    try:
        return asyncio.run(main())
    except asyncio.CancelledError:
        if signalled:
            raise KeyboardInterrupt(f"terminated by signal {signalled[0]}") from None
        raise
