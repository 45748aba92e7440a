"""The sequence batcher's fields, shown on the live server: ``sequence`` (here) and ``state``.

``sequence`` (``sequence_batching`` itself, ``max_sequence_idle_microseconds``, ``control_input``, the backlog of
``direct``/``oldest`` slots, ``oldest.max_candidate_sequences``), four parts:

- refusals: a request without a correlation id, a first request of a new sequence without START, and a request after
  END to the same id without START are each refused with Triton's own error (:data:`NO_CORRID`, :data:`NO_START`);
- controls: a sequence START, middle, END is answered on every request (the model gets the control inputs the server
  fills: a model reading one that the served configuration lacks fails), and a request carrying a declared control
  input as a client tensor is refused (the server fills it; a served configuration that takes it as an ordinary
  input would let the client set it). The values the model sees (``int32_false_true``, ``fp32_false_true``,
  ``bool_false_true``, CORRID's ``data_type``) reach only the model: they show in its answers, which only the
  deployment's own accuracy (its sequences against a reference) can judge;
- backlog (:mod:`tritonsuite.judge.conformance.sequence_backlog`): exactly ``slots`` sequences are live at once,
  the others wait, and each is answered after an END freed a slot; sent again where a stalled host let the server
  release a live sequence rightly;
- idle release: sequences left idle 1.5 x ``max_sequence_idle_microseconds`` (1 s when 0) plus 0.1 s are released
  (their next request, without START, refused with :data:`NO_START`) while as many sequences sending every quarter
  of it over the same span continue (2 or 3 of each; one of each on a single slot); shown only when the
  idle time is at most :data:`IDLE_BOUND_S` (a longer one costs a conformance run that long, twice on one slot).

Other traffic on the model during the check takes slots (the backlog part counts the sequences live at once): check
a deployment nobody else is sending to. Ids are whole numbers: a CORRID of ``TYPE_STRING`` is not tried.

``state``: :mod:`tritonsuite.judge.conformance.state`.
"""
from __future__ import annotations

import asyncio
import time

import numpy as np

from tritonsuite.judge.conformance.result import CheckResult, Target
from tritonsuite.judge.conformance.sequence_backlog import backlog_part
from tritonsuite.judge.conformance.sequence_wire import BOUND_S, NO_CORRID, NO_START, SEQUENCE_IDS, Wire, stalls
from tritonsuite.load.client import batch_first
from tritonsuite.load.exchange import exchange
from tritonsuite.core.reasons import reason

IDLE_BOUND_S = 5.0  # a declared idle time longer than this is not waited out (the part says so)
MAX_SLOTS = 64  # more slots than this are not all filled (one connection per sequence)
PAIRS = 3  # pairs of sequences: the idle part's (at most), the state check's


#: every failure reason this check gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("{}: {} (Triton refuses it: {})",
           "unit/test_judge_sequence.py::test_a_probe_answered_or_refused_otherwise_names_triton_s_refusal"),
    reason("the {} request of a whole sequence failed (the control inputs the server fills reach the model): {}",
           "unit/test_judge_sequence.py::test_a_request_of_a_whole_sequence_refused_fails",
           "test_conformance_sequence.py::test_a_sequence_model_served_otherwise_fails"),
    reason("control input {} ({}) sent as a client tensor was answered: the served configuration takes it from the "
           "client, not from the sequence batcher",
           "unit/test_judge_sequence.py::test_a_control_input_answered_from_a_client_fails",
           "test_conformance_sequence.py::test_a_sequence_model_served_otherwise_fails"),
    reason("max_sequence_idle_microseconds {}: {}/{} sequences idle {} s were not released ({})",
           "unit/test_judge_sequence.py::test_an_idle_sequence_still_answered_was_not_released",
           "test_conformance_sequence.py::test_a_sequence_model_served_otherwise_fails"),
    reason("max_sequence_idle_microseconds {}: {}/{} sequences sending every {} s were cut ({})",
           "unit/test_judge_sequence.py::test_a_sending_sequence_refused_was_cut",
           "test_conformance_sequence.py::test_a_sequence_model_served_otherwise_fails"),
)


def not_sequence(target: Target, check: str) -> CheckResult | None:
    if target.description.sequence_batching is None:
        return CheckResult(target.name, check, "-", "-", "skipped", f"no sequence_batching declared "
                           f"(scheduler {target.description.scheduler}): no sequence batcher to check")
    return None


def one_request(target: Target, flags, extra=None) -> str:
    """One request with ``flags`` (id, START, END) through the driver: "" when answered, else its error."""
    request = {**target.request(1), **(extra or {})}
    answer = exchange(target.server, target.name, target.description,
                      [batch_first(request, target.description.batching)], target.output_names, count=1, flags=flags,
                      timeout_s=BOUND_S)[0]
    return "" if answer.ok else answer.error


def _refusals(target: Target, wire: "Wire", seen: dict) -> list[str]:
    """Triton's refusals, and a whole sequence (START, middle, END, back to back on one connection: the model gets
    the control inputs the server fills) that must be answered before the request after its END is refused."""
    probes = [("no correlation id", (0, False, False), NO_CORRID), ("no correlation id, START+END", (0, True, True),
                                                                     NO_CORRID),
              ("new sequence without START", (next(SEQUENCE_IDS), False, False), NO_START),
              ("new sequence without START, with END", (next(SEQUENCE_IDS), False, True), NO_START)]
    found = [(what, one_request(target, flags), expected) for what, flags, expected in probes]

    async def whole():
        conn, sid = await wire.open(), next(SEQUENCE_IDS)
        try:
            return [(what, (await wire.send(conn, sid, *flags))[2], expected) for what, flags, expected in (
                ("START", (True, False), ""), ("middle", (False, False), ""), ("END", (False, True), ""),
                ("after END without START", (False, False), NO_START))]
        finally:
            conn.close()

    found += asyncio.run(whole())
    for what, error, _ in found:
        seen[what] = error or "answered"
    return judge_refusals(found)


def judge_refusals(found: list[tuple[str, str, str]]) -> list[str]:
    """The problems of the refusal probes: each (what was sent, its error, "" when answered; Triton's refusal
    expected, "" when an answer is)."""
    problems = []
    for what, error, expected in found:
        if expected and expected not in error:
            problems.append(f"{what}: {'answered' if not error else 'refused with another error: ' + error[:150]}"
                            f" (Triton refuses it: {expected!r})")
        elif not expected and error:
            problems.append(f"the {what} request of a whole sequence failed (the control inputs the server fills "
                            f"reach the model): {error[:150]}")
    return problems


def control_tensor(target: Target, datatype: str) -> np.ndarray:
    from tritonclient.utils import triton_to_np_dtype

    shape = (1, 1) if target.description.batching else (1,)
    if datatype in ("STRING", "BYTES"):
        return np.array([b"1"], dtype=object).reshape(shape)
    return np.ones(shape, dtype=triton_to_np_dtype(datatype))


def _controls(target: Target, seen: dict) -> list[str]:
    """Each declared control input sent by the client: refused (the server fills it)."""
    sent = []
    for control in {c.name: c for c in target.description.sequence_batching.controls}.values():
        error = one_request(target, (next(SEQUENCE_IDS), True, True),
                            {control.name: control_tensor(target, control.datatype)})
        seen[f"{control.name} sent by the client"] = error or "answered"
        sent.append((control.name, control.kind, error))
    return judge_controls(sent)


def judge_controls(sent: list[tuple[str, str, str]]) -> list[str]:
    """The problems of the control inputs sent by a client: each (name, kind, its error: "" when answered)."""
    problems = []
    for name, kind, error in sent:
        if not error:
            problems.append(f"control input {name} ({kind}) sent as a client tensor was answered: the served "
                            f"configuration takes it from the client, not from the sequence batcher")
    return problems


async def _idle(wire: Wire, idle_s: float, slots_free: int) -> dict:
    span = 1.5 * idle_s + 0.1
    found = {"released": [], "continued": [], "continued_span_s": [], "largest_gap_s": 0.0}

    async def released() -> None:
        conn, sid = await wire.open(), next(SEQUENCE_IDS)
        try:
            _, answered, error = await wire.send(conn, sid, True, False)
            if error:
                found["released"].append(f"START: {error}")
                return
            await asyncio.sleep(max(0.0, span - (time.monotonic() - answered)))
            error = (await wire.send(conn, sid, False, False))[2]
            found["released"].append(error or "answered")
            if not error:  # still open on the server: end it
                await wire.send(conn, sid, False, True)
        finally:
            conn.close()

    async def continued() -> None:
        conn, sid = await wire.open(), next(SEQUENCE_IDS)
        try:
            t0, last, error = await wire.send(conn, sid, True, False)
            previous, longest = t0, 0.0  # the previous request's send; the longest span from it to the next answer
            while not error and time.monotonic() - t0 < span:
                await asyncio.sleep(idle_s / 4)
                sent, answered, error = await wire.send(conn, sid, False, False)
                found["largest_gap_s"] = round(max(found["largest_gap_s"], sent - last), 3)
                longest, previous, last = max(longest, answered - previous), sent, answered
            if not error:
                _, answered, error = await wire.send(conn, sid, False, True)
                longest = max(longest, answered - previous)
            found["continued"].append(error or "answered")
            found["continued_span_s"].append(round(longest, 3))
        finally:
            conn.close()

    # never more live sequences than slots (none waits in the backlog): at least two of each where two fit at once
    # (3 pairs on 6 slots, 2 on 4, 1 pair twice on 2), one of each on 1 slot
    pairs = min(PAIRS, slots_free // 2)
    rounds = ([[released, continued] * pairs] * (2 if pairs == 1 else 1)) if pairs else [[released], [continued]]
    for jobs in rounds:
        await asyncio.gather(*(job() for job in jobs))
    return found


def judge_idle(idle: dict, idle_us: int) -> list[str]:
    """The idle part's problems: ``idle`` as :func:`_idle` found it (each released sequence's next request: refused
    with :data:`NO_START` when released; each continued one: "answered" when it was), ``idle_us`` the served
    max_sequence_idle_microseconds."""
    idle_s = idle_us / 1e6
    kept = [e for e in idle["released"] if NO_START not in e]
    cut = [e for e, span in _continued(idle) if e != "answered" and span <= idle_s]
    problems = []
    if kept:
        problems.append(f"max_sequence_idle_microseconds {idle_us}: {len(kept)}/{len(idle['released'])} sequences "
                        f"idle {1.5 * idle_s + 0.1:g} s were not released ({kept[0][:120]})")
    if cut:
        problems.append(f"max_sequence_idle_microseconds {idle_us}: {len(cut)}/{len(idle['continued'])} sequences "
                        f"sending every {idle_s / 4:g} s were cut ({cut[0][:120]})")
    return problems


def unjudged_idle(idle: dict, idle_us: int) -> str:
    """Why a sending sequence's cut says nothing ("" where each says something): the span from one of its requests'
    send to the next one's answer outlasted the idle timeout (a host that stalled the client or the server), so the
    server may have released it rightly. Within that span the server cannot have seen it idle that long: a cut then
    is the server's (:func:`judge_idle`)."""
    n, words = stalls((span for e, span in _continued(idle) if e != "answered"), idle_us)
    return f"idle release not judged for {n} cut sequence(s): {words}" if n else ""


def _continued(idle: dict) -> list[tuple[str, float]]:
    """Each sending sequence's outcome and its longest span (0 where not measured)."""
    spans = idle.get("continued_span_s") or [0.0] * len(idle["continued"])
    return list(zip(idle["continued"], spans))


def check_sequence(target: Target, idle_bound_s: float = IDLE_BOUND_S) -> CheckResult:
    skipped = not_sequence(target, "sequence")
    if skipped:
        return skipped
    sb = target.description.sequence_batching
    declared, idle_s = target.description.sequence_slots, sb.max_sequence_idle_microseconds / 1e6
    evidence: dict = {"slots": declared, "idle_s": idle_s, "refusals": {}, "controls": {},
                      "declared_controls": [f"{c.name}: {c.kind} {c.datatype}" for c in sb.controls]}
    wire, unjudged = Wire(target), []
    problems = _refusals(target, wire, evidence["refusals"]) + _controls(target, evidence["controls"])
    refused = [k for k, v in evidence["refusals"].items() if NO_CORRID in v or NO_START in v]
    whole = all(evidence["refusals"][w] == "answered" for w in ("START", "middle", "END"))
    parts = [f"{len(refused)}/{len(evidence['refusals']) - 3} refused with Triton's errors, a whole sequence "
             f"{'answered' if whole else 'not answered'}", f"{sum(v != 'answered' for v in evidence['controls'].values())}/"
             f"{len(evidence['controls'])} control inputs sent by a client refused"]
    if any(evidence["refusals"][w] not in ("answered",) and NO_START not in evidence["refusals"][w]
           for w in ("START", "middle", "END")):  # the model fails (released between requests: the idle part's)
        parts.append("backlog and idle release not shown: a whole sequence is not answered")
    elif declared > MAX_SLOTS:
        parts.append(f"backlog not shown ({declared} slots > {MAX_SLOTS})")
    else:
        evidence["backlog"], observed, found, why = backlog_part(wire, declared, sb.max_sequence_idle_microseconds)
        parts.append(observed)
        problems += found
        unjudged += [why] if why else []
    if "not shown: a whole" in parts[-1]:
        pass
    elif idle_s > idle_bound_s:
        parts.append(f"idle release not shown (declared {idle_s:g} s > bound {idle_bound_s:g} s)")
    else:
        # fewer served: none waits either (a backlog not judged counted none)
        live = (not unjudged and evidence.get("backlog", {}).get("live_at_once")) or declared
        idle = evidence["idle"] = asyncio.run(_idle(wire, idle_s, min(declared, live)))
        parts.append(f"{sum(NO_START in e for e in idle['released'])}/{len(idle['released'])} idle "
                     f"{1.5 * idle_s + 0.1:g} s released, {idle['continued'].count('answered')}/"
                     f"{len(idle['continued'])} sending every {idle_s / 4:g} s continued")
        problems += judge_idle(idle, sb.max_sequence_idle_microseconds)
        unjudged += [why] if (why := unjudged_idle(idle, sb.max_sequence_idle_microseconds)) else []
    controls = ", ".join(c.kind.removeprefix("CONTROL_SEQUENCE_") for c in sb.controls) or "none"
    return CheckResult(target.name, "sequence",
                       f"sequence_batching {sb.strategy}: {declared} slots, max_sequence_idle_microseconds "
                       f"{sb.max_sequence_idle_microseconds}, controls {controls}",
                       "; ".join(parts), "fail" if problems else "pass",
                       "; ".join(problems + unjudged), evidence)
