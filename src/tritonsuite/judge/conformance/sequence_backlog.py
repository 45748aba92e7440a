"""The ``sequence`` check's backlog part (:mod:`tritonsuite.judge.conformance.sequence`): slots = ``max_batch_size``
(``oldest``: ``max_candidate_sequences``) x instances. Slots + :data:`EXTRA` sequences start at once; the answered
ones keep sending (so none goes idle) until no new first answer has come for :data:`HOLD_S` and each sent
:data:`HOLD_REQUESTS` more: exactly ``slots`` sequences are live, the others' first requests wait; then the live ones
end, and every waiting sequence is answered, after an END freed its slot.

A live sequence the server released for idleness (its next request refused without START, Triton's
:data:`~tritonsuite.judge.conformance.sequence_wire.NO_START`) after a span from one of its requests' send to the next
one's answer over ``max_sequence_idle_microseconds`` was released rightly: the host stalled the client or the
server, and a waiting sequence took the freed slot, so the count of live sequences says nothing. The part is then
sent again, at most :data:`TRIES` times, and not judged when every try stalled. A release within that span is the
server's, and fails the part."""
from __future__ import annotations

import asyncio
import time

from tritonsuite.core.reasons import reason
from tritonsuite.judge.conformance.sequence_wire import BOUND_S, NO_START, SEQUENCE_IDS, Wire, stalls
from tritonsuite.load.interrupt import within

EXTRA = 2  # sequences started beyond the slots: the backlog
HOLD_S, HOLD_REQUESTS = 0.3, 5  # how long, and how many requests each live sequence sends, with no new sequence live
TRIES = 3  # the part sent at most this often while a stalled host released a live sequence, then not judged

#: every failure reason this part gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("{} of {} sequences were live at once (declared {} slots: max_batch_size/max_candidate_sequences x "
           "instances); no backlog: the server has more slots",
           "unit/test_judge_sequence.py::test_one_sequence_more_or_fewer_live_than_the_slots_fails",
           "test_conformance_sequence.py::test_a_sequence_model_served_otherwise_fails"),
    reason("{} of {} sequences were live at once (declared {} slots: max_batch_size/max_candidate_sequences x "
           "instances); fewer slots than declared",
           "unit/test_judge_sequence.py::test_one_sequence_more_or_fewer_live_than_the_slots_fails",
           "test_conformance_sequence.py::test_a_sequence_model_served_otherwise_fails"),
    reason("backlog: {} requests refused ({})",
           "unit/test_judge_sequence.py::test_a_backlog_request_refused_fails_with_the_first_error",
           "unit/test_judge_sequence.py::test_a_live_sequence_released_within_the_idle_time_is_the_server_s"),
)


async def send_backlog(wire: Wire, declared: int) -> dict:
    """The part's sequences on ``wire``, what they found: ``released`` holds each sequence refused with NO_START and
    its longest span (s) from a request's send to the next one's answer."""
    ids = [next(SEQUENCE_IDS) for _ in range(declared + EXTRA)]
    first: dict[int, tuple] = {}
    middles = [0] * len(ids)
    errors: list[str] = []
    released: list[dict] = []
    ends: list[float] = []
    release = asyncio.Event()

    async def one(i: int) -> None:
        conn, previous, longest = await wire.open(), 0.0, 0.0  # the last request's send; the longest span

        async def send(end: bool, what: str) -> bool:
            nonlocal previous, longest
            sent, answered, error = await wire.send(conn, ids[i], False, end)
            longest, previous = max(longest, answered - previous), sent
            if error:
                errors.append(f"sequence {ids[i]} {what}: {error}")
                if NO_START in error:
                    released.append({"sequence": ids[i], "span_s": round(longest, 3)})
            return not error

        try:
            first[i] = sent = await wire.send(conn, ids[i], True, False)
            previous = sent[0]
            if sent[2]:
                errors.append(f"sequence {ids[i]} START: {sent[2]}")
                return
            while not release.is_set():
                if not await send(False, f"request {middles[i] + 1}"):
                    return
                middles[i] += 1
                await asyncio.sleep(0.005)
            ends.append(time.monotonic())
            await send(True, "END")
        finally:
            conn.close()

    tasks = [asyncio.ensure_future(one(i)) for i in range(len(ids))]
    deadline, last, mark = time.monotonic() + BOUND_S, (-1, 0.0), {}
    while time.monotonic() < deadline and not all(t.done() for t in tasks):
        if len(first) != last[0]:
            last, mark = (len(first), time.monotonic()), {i: middles[i] for i in first}
        elif (time.monotonic() - last[1] >= HOLD_S and first
              and all(middles[i] - mark[i] >= HOLD_REQUESTS for i in mark if not tasks[i].done())):
            break
        await asyncio.sleep(0.01)
    live = sorted(i for i, sent in first.items() if not sent[2])
    release.set()
    await within(asyncio.gather(*tasks), BOUND_S * 2)
    waiting = [i for i in range(len(ids)) if i not in live]
    return {"sequences": len(ids), "live_at_once": len(live), "waited": len(waiting),
            "middle_requests_while_live": sum(middles[i] for i in live),
            "waited_ms": [round((first[i][1] - first[i][0]) * 1e3, 1) for i in waiting if i in first],
            "answered_after_an_end": sum(1 for i in waiting if i in first and ends and first[i][1] >= min(ends)),
            "errors": errors[:8], "released": released}


def judge_backlog(backlog: dict, declared: int) -> list[str]:
    """The backlog part's problems: ``backlog`` as :func:`send_backlog` found it, ``declared`` the slots."""
    problems = []
    live = backlog["live_at_once"]
    if live > declared:
        problems.append(f"{live} of {backlog['sequences']} sequences were live at once (declared {declared} slots: "
                        f"max_batch_size/max_candidate_sequences x instances); no backlog: the server has more slots")
    elif live < declared:
        problems.append(f"{live} of {backlog['sequences']} sequences were live at once (declared {declared} slots: "
                        f"max_batch_size/max_candidate_sequences x instances); fewer slots than declared")
    if backlog["errors"]:
        problems.append(f"backlog: {len(backlog['errors'])} requests refused ({backlog['errors'][0][:150]})")
    return problems


def stalled(backlog: dict, idle_us: int) -> str:
    """Why ``backlog`` says nothing ("" where it does): a live sequence released after a span over the served
    ``max_sequence_idle_microseconds`` (the host stalled), rightly."""
    n, words = stalls((r["span_s"] for r in backlog["released"]), idle_us)
    return f"{n} live sequence(s) released after {words}" if n else ""


def backlog_part(wire: Wire, declared: int, idle_us: int) -> tuple[dict, str, list[str], str]:
    """The part sent (again while a stalled host spoiled it): its evidence (``tries`` how often it was sent), what
    it observed, its problems, and why it was not judged ("" where it was)."""
    for tries in range(1, TRIES + 1):
        backlog = asyncio.run(send_backlog(wire, declared))
        backlog["tries"] = tries
        why = stalled(backlog, idle_us)
        if not why:
            return backlog, (f"{backlog['live_at_once']} of {backlog['sequences']} sequences live at once, "
                             f"{backlog['waited']} waited ({backlog['answered_after_an_end']} answered after an "
                             f"END)"), judge_backlog(backlog, declared), ""
    return backlog, f"backlog not judged in {TRIES} tries", [], f"backlog not judged: in each of {TRIES} tries {why}"
