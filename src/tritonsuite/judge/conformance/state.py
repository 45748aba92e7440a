"""The sequence batcher's implicit state, shown on the live server: ``state``.

``state`` (``sequence_batching.state``: implicit state, its ``input_name``/``output_name``/``data_type``/``dims``/
``initial_state``): the state carries from one request of a sequence to the next (two sequences with different first
requests and the same second request answer the second differently), never across sequences (a sequence sent again
after others answers as the first time; sequences interleaved answer as each sent alone), and a client cannot send
the state input. The initial state's value reaches only the model (it shows as the first answers being the same for
every sequence, which the repeat shows).
"""
from __future__ import annotations

import numpy as np

from tritonsuite.judge.conformance.result import CheckResult, Target
from tritonsuite.judge.conformance.sequence import PAIRS, control_tensor, not_sequence, one_request
from tritonsuite.judge.conformance.sequence_wire import BOUND_S, SEQUENCE_IDS
from tritonsuite.judge.conformance.traffic import same
from tritonsuite.core.reasons import reason

INTERLEAVED, STEPS = 4, 3  # the state check's sequences interleaved, and steps of each


#: every failure reason this check gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("state {}: {}/{} pairs of sequences answered their second request identically after different first "
           "requests: the state the first left did not reach it",
           "unit/test_judge_state.py::test_second_answers_the_same_after_different_firsts_show_no_state_carried",
           "test_conformance_sequence.py::test_a_model_that_does_not_keep_state_as_declared_fails",
           "test_conformance_sequence.py::test_the_python_backend_drops_the_output_state"),
    reason("the same sequence sent again after {} others answered differently ({}): state leaked across sequences",
           "unit/test_judge_state.py::test_a_repeat_answered_otherwise_leaked_state_across_sequences",
           "test_conformance_sequence.py::test_a_model_that_does_not_keep_state_as_declared_fails"),
    reason("{}/{} sequences interleaved answered otherwise than alone ({})",
           "unit/test_judge_state.py::test_sequences_interleaved_answered_otherwise_than_alone_fail",
           "test_conformance_sequence.py::test_a_model_that_does_not_keep_state_as_declared_fails"),
    reason("state input {} sent as a client tensor was answered: the served configuration takes it from the client",
           "unit/test_judge_state.py::test_the_state_input_answered_from_a_client_fails",
           "test_conformance_sequence.py::test_a_state_model_served_with_its_state_as_a_client_input_fails"),
)


def _differs(target: Target, seed: int, other: dict) -> dict:
    """The first request from ``seed`` on that is not ``other`` (small integer inputs repeat)."""
    for s in range(seed, seed + 50):
        found = target.request(1, s)
        if not same(found, other):
            return found
    raise ValueError(f"{target.name}: seeded requests are all the same: the state check needs different inputs")


def check_state(target: Target) -> CheckResult:
    from tritonsuite.load.exchange import send_sequences

    skipped = not_sequence(target, "state")
    if skipped:
        return skipped
    sb = target.description.sequence_batching
    if not sb.states:
        return CheckResult(target.name, "state", "-", "-", "skipped", "no sequence_batching.state declared: no "
                           "implicit state to carry")

    def send(sequences, together=False):
        first = next(SEQUENCE_IDS)
        for _ in range(len(sequences)):
            next(SEQUENCE_IDS)
        return send_sequences(target.server, target.description, sequences, target.output_names, "http", together, first,
                              BOUND_S)

    repeated = [target.request(1, 100 + i) for i in range(STEPS)]
    before = send([repeated])
    pairs = []
    for p in range(PAIRS):
        a, c = target.request(1, 10 * p + 1), target.request(1, 10 * p + 5)
        pairs.append(([a, c], [_differs(target, 10 * p + 2, a), c]))
    answers = send([s for pair in pairs for s in pair])
    mixed = [[target.request(1, 200 + 10 * s + i) for i in range(STEPS)] for s in range(INTERLEAVED)]
    together, alone = send(mixed, together=True), send(mixed)
    after = send([repeated])
    name = sb.states[0][0]
    state_input = next((s for s in target.description.config["sequence_batching"].get("state", [])
                        if s.get("input_name") == name), {})
    client = one_request(target, (next(SEQUENCE_IDS), True, True),
                  {name: control_tensor(target, str(state_input.get("data_type", "TYPE_FP32")).removeprefix("TYPE_"))})
    names = ", ".join(f"{i} <- {o}" for i, o in sb.states)
    problems, evidence = judge_state(names, name, answers, before, after, together, alone, client)
    kept, leaked, interleaved = evidence["pairs_same_second_answer"], evidence["repeat_differs"], \
        evidence["interleaved_differ"]
    evidence = {"states": [list(s) for s in sb.states], **evidence}
    observed = (f"{PAIRS - len(kept)}/{PAIRS} pairs carried state to the second request; a repeat "
                f"{'differed' if leaked else 'answered the same'}; {INTERLEAVED - interleaved}/{INTERLEAVED} "
                f"interleaved as alone; the state input sent by a client {'answered' if not client else 'refused'}")
    return CheckResult(target.name, "state", f"implicit state {names} of {sb.strategy} sequences: carried within a "
                       f"sequence, never across", observed, "fail" if problems else "pass", "; ".join(problems),
                       evidence)


def judge_state(names: str, name: str, pairs: list, before: list, after: list, together: list, alone: list,
                client: str) -> tuple[list[str], dict]:
    """The state check's problems and evidence from its answers (each a list of sequences, each a list of steps'
    outputs): ``pairs`` the :data:`PAIRS` pairs of sequences that differ in their first request only, one after the
    other; ``before``/``after`` one sequence sent first and again after all the others; ``together``/``alone`` the
    :data:`INTERLEAVED` sequences interleaved and each alone; ``client`` the error of a request carrying the state
    input ``name`` ("" when answered); ``names`` the states in words."""
    from tritonsuite.judge.responses import compare_runs

    kept = [p for p in range(PAIRS) if same(pairs[2 * p][1], pairs[2 * p + 1][1])]
    interleaved, steps, first = compare_runs(together, alone, "sequence", "step")
    leaked, _, leak = compare_runs(after, before, "sequence", "step")
    problems = []
    if kept:
        problems.append(f"state {names}: {len(kept)}/{PAIRS} pairs of sequences answered their second request "
                        f"identically after different first requests: the state the first left did not reach it")
    if leaked:
        problems.append(f"the same sequence sent again after {2 * PAIRS + 2 * INTERLEAVED} others answered "
                        f"differently ({leak}): state leaked across sequences")
    if interleaved:
        problems.append(f"{interleaved}/{INTERLEAVED} sequences interleaved answered otherwise than alone ({first})")
    if not client:
        problems.append(f"state input {name} sent as a client tensor was answered: the served configuration takes "
                        f"it from the client")
    evidence = {"pairs_same_second_answer": kept, "repeat_differs": leak or "", "interleaved_differ": interleaved,
                "interleaved_steps": steps, "state_sent_by_client": client or "answered",
                "repeat_answers": [[{k: np.asarray(v).tolist() for k, v in step.items()} for step in run]
                                   for run in (before[0], after[0])]}
    return problems, evidence
