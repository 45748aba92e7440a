"""The load generator's CPU time per deployment in a mix: each task of one generator's traffic driven step by step,
its thread CPU time counted to that generator (all generators share one event loop)."""
from __future__ import annotations

import time


class _Metered:
    """Drives a coroutine step by step, adding the thread CPU time of each step to ``owner.cpu_s``: how much of the
    load generator's CPU one deployment's traffic took in a mix (all generators share one event loop)."""

    __slots__ = ("coro", "owner")

    def __init__(self, coro, owner):
        self.coro, self.owner = coro, owner

    def __await__(self):
        coro, owner = self.coro, self.owner
        value, error = None, None
        while True:
            t0 = time.thread_time()
            try:
                future = coro.throw(error) if error is not None else coro.send(value)
            except StopIteration as stop:
                owner.cpu_s += time.thread_time() - t0
                return stop.value
            except BaseException:
                owner.cpu_s += time.thread_time() - t0
                raise
            owner.cpu_s += time.thread_time() - t0
            try:
                value, error = (yield future), None
            except BaseException as exc:  # noqa: BLE001 - cancellation and the like go into the coroutine
                value, error = None, exc


async def metered(coro, owner):
    """``coro`` awaited with the CPU time of its steps added to ``owner.cpu_s``."""
    return await _Metered(coro, owner)
