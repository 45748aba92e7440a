import asyncio
import os
import signal

import pytest

from tritonsuite.load.interrupt import run_interruptible


def _raise(signum, frame):
    raise KeyboardInterrupt(f"terminated by signal {signum}")


def test_sigterm_cancels_the_run_then_raises_keyboard_interrupt_with_every_task_ended():
    """The plugin's SIGTERM handler raises KeyboardInterrupt; in a load generator's run it must end every task
    (their ``finally`` blocks run, no exception left unread) before the interrupt reaches the caller."""
    ended, unread = [], []

    async def worker(event):
        try:
            while True:
                try:
                    await asyncio.wait_for(event.wait(), 0.01)  # where CI's SIGTERM once landed (_wait_windows)
                except asyncio.TimeoutError:
                    pass
        finally:
            ended.append("worker")

    async def run():
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: unread.append(context))
        task = asyncio.ensure_future(worker(asyncio.Event()))
        asyncio.get_running_loop().call_later(0.05, os.kill, os.getpid(), signal.SIGTERM)
        try:
            await asyncio.sleep(5)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            ended.append("run")

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        with pytest.raises(KeyboardInterrupt, match="terminated by signal 15"):
            run_interruptible(run())
        assert signal.getsignal(signal.SIGTERM) is _raise  # the caller's handler is back
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert ended == ["worker", "run"] and not unread, (ended, unread)


def test_without_a_python_handler_it_is_asyncio_run():
    async def answer():
        return 42

    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        assert run_interruptible(answer()) == 42
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)
