"""MLPerf-style system checks: what MLPerf inference's compliance tests verify of a system under test, asked of a
deployment on a live server, through its driver (a sequence model's traffic in sequences, a decoupled model's on
gRPC streams, any other over HTTP).

- ``test01`` (MLPerf's TEST01, "results logged under performance load equal the accuracy run's"): a closed-loop load
  of distinct seeded inputs at a concurrency that gives the batcher something to group (twice its largest batch);
  a seeded share of the answers is sampled and those inputs are sent again one at a time; each answer under load
  must equal its answer alone within the accuracy-under-load comparison's tolerance (``ModelSpec.tolerance``'s
  default: atol 1e-4 + rtol 1e-4 for floating outputs, fp16 wider; integers and strings exactly), a decoupled
  model's whole list of responses. A sequence model's sequences are sent interleaved, each on its own connection,
  then each alone, and compared step by step. A model whose answer depends on its batch-mates fails. Skipped where
  the response cache is enabled (the deployment's or a step's): the inputs sent alone would be answered from it.
- ``test04`` (MLPerf's TEST04, "the system does not cache samples"): rounds of one input repeated against rounds of
  inputs never sent before, alternated (A B B A A B B A, so a drift of the host weighs on both alike); with no
  ``response_cache`` declared, repeats must not be answered decisively faster: something would then answer repeats
  without computing them. Skipped where the response cache is enabled (the deployment's or a step's: the cache
  check judges it).
- ``test05`` (MLPerf's TEST05, "performance does not favour the default random seeds"): rounds of inputs drawn from
  seed stream A (:data:`SEED_A`, the suite's own requests) against stream B (:data:`SEED_B`), alternated alike; each
  round takes fresh inputs from its stream, so a model whose cost varies with its data shows that variation as the
  rounds' own spread, and only a gap between the streams beyond it fails.

A round's cost is the server's compute time per inference: the executions' ``compute_infer`` ns (each execution
once, an ensemble's steps summed) over the samples the client sent, so a request answered without an execution
lowers it too; the wall time per inference where the server counts no execution time. A gap is decisive, and fails,
only when every round of the cheaper condition beats every round of the other, the medians differ by more than
:data:`MIN_GAP` and by more than :data:`CLEAR` times the rounds' own relative spread (a busy host widens the spread,
never the verdict), and by more than :data:`FLOOR_MS` per inference; and then a second set of rounds, taken only
when the first is decisive, must be decisive the same way (on a busy host a neighbour's bursts can line up with one
condition's rounds once; a model whose cost follows its data does it every time).
"""
from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping

import numpy as np


from tritonsuite.core.tensors import answer_difference
from tritonsuite.judge.conformance.result import CheckResult, Target
from tritonsuite.judge.conformance.traffic import counted, largest_batch, responses, settled_statistics, stats_delta
from tritonsuite.load.client import batch_first
from tritonsuite.load.exchange import exchange
from tritonsuite.core.reasons import reason

#: test01's comparison (atol, rtol): ModelSpec.tolerance's default, which accuracy under load uses for an output
#: without its own; fp16 outputs (batched kernels round in another order) as wide_deep's fp16 rule
TOLERANCE = (1e-4, 1e-4)
HALF_TOLERANCE = (2e-3, 1e-2)
MAX_CONCURRENCY = 32
LOAD_REQUESTS = 32  # test01: distinct inputs under load (at least; 4 per connection)
SAMPLE_SHARE, MIN_SAMPLES, SAMPLE_SEED = 0.25, 8, 0  # test01: answers sampled and sent again alone
SEQUENCE_STEPS, MAX_SEQUENCES = 4, 8  # test01 on a sequence model: sequences interleaved, each of this length
DEADLINE_S = 10.0  # test01: the load's bound, and the inputs sent alone's (a slow model sends fewer)
#: test04 / test05: the rounds' order (A and B alike in position), requests per round and requests in flight
ORDER = "ABBAABBA"
ROUND_REQUESTS, ROUND_CONCURRENCY, ROUND_DEADLINE_S = 12, 2, 2.0  # a slow model: fewer per round
MIN_GAP = 0.25  # a decisive gap: the slower condition's median at least this much above the faster's ...
CLEAR = 2.0  # ... and this many times the rounds' own relative spread ...
FLOOR_MS = 0.1  # ... and this many ms per inference (a host's timer and wake-up noise)
SEED_A, SEED_B = 0, 1_000_000  # test05's seed streams: A is the one the suite's requests use
_SEQUENCE_IDS = itertools.count(900_001, 64)  # correlation ids of these checks' sequences (fit an int32 CORRID)
_SEEDS = itertools.count(2_000_000)  # test01's sequence steps: inputs no other check sends


#: every failure reason this check gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("{} requests failed ({})",
           "unit/test_judge_system.py::test_failed_requests_fail_and_an_input_failed_alone_is_not_compared",
           "unit/test_judge_system.py::test_failed_requests_of_the_rounds_fail",
           "unit/test_judge_system.py::test_a_failed_untimed_round_fails_with_nothing_to_compare"),
    reason("{} of {} {}s answered under load (executions by batch size {}) differ from the same {} sent alone; "
           "first, {} {}: {}",
           "unit/test_judge_system.py::test_an_answer_under_load_beyond_the_tolerance_of_its_answer_alone_fails",
           "test_conformance_system.py::test_test01_catches_an_answer_that_depends_on_its_batch_mates",
           "test_conformance_system.py::test_test01_compares_a_sequence_model_interleaved_with_alone"),
    reason("no answer under load could be compared",
           "unit/test_judge_system.py::test_nothing_compared_and_nothing_failed_fails"),
    reason("{}{} cost {} ms per inference against {} ms for {} ({}): {} apart, beyond {}x the rounds' own "
           "spread ({}), every round of one beyond every round of the other{}",
           "unit/test_judge_system.py::test_repeats_decisively_cheaper_than_fresh_inputs_fail_test04",
           "unit/test_judge_system.py::test_a_seed_stream_decisively_cheaper_fails_test05_either_way",
           "unit/test_judge_system.py::test_a_decisive_gap_repeated_the_same_way_fails_naming_both_sets",
           "test_conformance_system.py::test_test04_catches_a_model_that_memoises_its_inputs",
           "test_conformance_system.py::test_test05_catches_a_cost_that_depends_on_the_seed"),
)


def _judged(target: Target) -> list[str]:
    """The models whose executions compute the deployment's answers (an ensemble's steps, else itself)."""
    return [m.name for m in target.driver.scheduled()]


def _cached(target: Target) -> str:
    """The deployment's models that enable the response cache (itself, or an ensemble's step), in words."""
    d = target.description
    return ", ".join(m.name for m in (d, *d.all_composing()) if m.response_cache)


def _concurrency(target: Target) -> int:
    b = max(target.batch_size, 1)
    return min(MAX_CONCURRENCY, max([2] + [math.ceil(2 * largest_batch(m) / b) for m in target.driver.scheduled()
                                           if m.batcher is not None]))


def _tolerance(dtype) -> tuple[float, float]:
    return HALF_TOLERANCE if np.dtype(dtype).itemsize < 4 else TOLERANCE


def _difference(got: list, want: list, item: str = "response", padded: Mapping[str, int] = {}) -> tuple[float, str]:
    """:func:`tritonsuite.core.tensors.answer_difference` within TEST01's tolerance (half precision's for an output
    of less than 4 bytes), a count told against the answer alone."""
    return answer_difference(got, want, item, lambda name, dtype: _tolerance(dtype), padded, " alone")


def _sequences(target: Target, runs: list, together: bool) -> list:
    from tritonsuite.load.exchange import send_sequences

    return send_sequences(target.server, target.description, runs, target.output_names, "grpc", together=together,
                          first_id=next(_SEQUENCE_IDS))


# ------------------------------------------------------------------------------------------------------ TEST01
def _batches(target: Target, before: dict) -> dict:
    """Executions by batch size since ``before``, over the judged models: how the load was batched."""
    found: dict = {}
    for m, then in before.items():
        for size, n in stats_delta(settled_statistics(target.server, m, 0.5), then)["batch_stats"].items():
            found[size] = found.get(size, 0) + n
    return dict(sorted(found.items()))


def _sequences_compared(target: Target, concurrency: int) -> dict:
    """Sequences of distinct inputs interleaved, one per connection, then each alone: every sequence compared."""
    count = min(MAX_SEQUENCES, concurrency)
    runs = [[target.request(1, next(_SEEDS)) for _ in range(SEQUENCE_STEPS)] for _ in range(count)]
    before = {m: settled_statistics(target.server, m) for m in _judged(target)}
    loaded = _sequences(target, runs, together=True)
    batches = _batches(target, before)
    return {"pairs": list(zip(loaded, _sequences(target, runs, together=False))), "picked": list(range(count)),
            "failed": [], "sent": count * SEQUENCE_STEPS, "batches": batches, "concurrency": count, "unit": "sequence",
            "what": f"{count} sequences of {SEQUENCE_STEPS} steps interleaved on {count} connections, each compared "
                    f"with the same sequence sent alone"}


def _requests_compared(target: Target, concurrency: int) -> dict:
    """Distinct inputs under closed-loop load; a seeded share of the answers compared with the inputs sent alone."""
    d = target.description
    count = max(LOAD_REQUESTS, 4 * concurrency)
    requests = [batch_first(target.fresh_request(target.batch_size), d.batching) for _ in range(count)]
    before = {m: settled_statistics(target.server, m) for m in _judged(target)}
    # one request per input: the answers, sorted by when each was sent, are in the inputs' order
    answers = exchange(target.server, target.name, d, requests, target.output_names, concurrency, count=count,
                       deadline_s=DEADLINE_S)
    batches = _batches(target, before)
    ok = [i for i, a in enumerate(answers) if a.ok]
    share = min(len(ok), max(MIN_SAMPLES, math.ceil(SAMPLE_SHARE * len(ok))))
    picked = sorted(int(i) for i in np.random.default_rng(SAMPLE_SEED).choice(ok, share, replace=False)) if ok else []
    alone = exchange(target.server, target.name, d, [requests[i] for i in picked], target.output_names, 1,
                     count=len(picked), deadline_s=DEADLINE_S) if picked else []
    return {"pairs": [(responses(answers[i]), responses(a) if a.ok else None) for i, a in zip(picked, alone)],
            "picked": picked, "failed": [a for a in answers + alone if not a.ok], "sent": len(answers),
            "batches": batches, "concurrency": concurrency, "unit": "input",
            "what": f"{len(answers)} seeded inputs of batch {target.batch_size} at concurrency {concurrency}, "
                    f"{len(picked)} sampled answers compared with the same inputs sent alone"}


def check_test01(target: Target) -> CheckResult:
    d = target.description
    batcher = ("dynamic_batching" if d.dynamic_batching is not None else
               "sequence_batching" if d.sequence_batching is not None else "no batcher")
    declared = (f"{batcher}, max_batch_size {d.max_batch_size}: each answer under load equals the same input's "
                f"answer alone (MLPerf TEST01)")
    if _cached(target):
        return CheckResult(target.name, "test01", declared, "-", "skipped",
                           f"response_cache enabled ({_cached(target)}): an input sent alone after the load is "
                           f"answered from the cache with its answer under load (the cache check compares cached "
                           f"answers with fresh ones)")
    start = time.monotonic()
    sequenced = target.driver.sequenced
    run = (_sequences_compared if sequenced else _requests_compared)(target, _concurrency(target))
    problems, compared, differ, worst = judge_test01(run, "step" if sequenced else "response", target.padded_axes)
    hist = run["batches"]
    evidence = {"concurrency": run["concurrency"], "sent_under_load": run["sent"], "failed": len(run["failed"]),
                "sampled": len(run["picked"]), "compared": compared, "differ": differ,
                "worst_abs_difference": worst if math.isfinite(worst) else None, "batch_stats": hist,
                "seconds": round(time.monotonic() - start, 3),
                "tolerance": {"atol": TOLERANCE[0], "rtol": TOLERANCE[1]}}
    observed = (f"{run['what']}: {differ} of {compared} differ, worst |diff| {worst:.3g}; executions "
                f"under load by batch size {hist}")
    return CheckResult(target.name, "test01", declared, observed, "fail" if problems else "pass",
                       "; ".join(problems), evidence)


def judge_test01(run: dict, item: str, padded: Mapping[str, int] = {}) -> tuple[list[str], int, int, float]:
    """(problems, answers compared, answers that differ, the largest |difference|) of a TEST01 run as
    :func:`_requests_compared` or :func:`_sequences_compared` found it: ``pairs`` (answer under load, answer alone:
    None where that request failed) of the ``picked`` inputs, the ``failed`` answers, the load's ``batches`` and its
    ``unit``; ``item`` what an answer is a list of (a sequence's steps, else responses), ``padded`` as
    :func:`_difference`'s."""
    unit, failed, hist = run["unit"], run["failed"], run["batches"]
    compared = [(i, *_difference(g, w, item, padded)) for i, (g, w) in zip(run["picked"], run["pairs"])
                if w is not None]
    differ = [(i, worst, why) for i, worst, why in compared if why]
    worst = max((w for _, w, _ in compared), default=0.0)
    problems = [f"{len(failed)} requests failed ({failed[0].error})"] if failed else []
    if differ:
        i, _, why = differ[0]
        problems.append(f"{len(differ)} of {len(compared)} {unit}s answered under load (executions by batch size "
                        f"{hist}) differ from the same {unit} sent alone; first, {unit} {i}: {why}")
    if not compared and not problems:
        problems.append("no answer under load could be compared")
    return problems, len(compared), len(differ), worst


# ---------------------------------------------------------------------------------------- TEST04 and TEST05
def _send(target: Target, requests: list) -> tuple[int, list[str]]:
    """One round's requests from :data:`ROUND_CONCURRENCY` connections (a sequence model's: as many sequences
    interleaved, the steps dealt between them): how many were answered, and the errors."""
    if target.driver.sequenced:
        _sequences(target, [requests[i::ROUND_CONCURRENCY] for i in range(ROUND_CONCURRENCY)], together=True)
        return len(requests), []
    answers = exchange(target.server, target.name, target.description,
                       [batch_first(r, target.description.batching) for r in requests], target.output_names,
                       ROUND_CONCURRENCY, count=len(requests), deadline_s=ROUND_DEADLINE_S, give_up=ROUND_CONCURRENCY)
    return sum(a.ok for a in answers), [a.error for a in answers if not a.ok]


def _rounds(target: Target, make) -> tuple[dict, list]:
    """The rounds of :data:`ORDER` after an untimed one of fresh inputs (a model's first executions are slower):
    ``make(label)`` gives a round's requests (a sequence model's: its steps). Each round's cost per inference and
    its figures, by label, and the errors of failed requests."""
    models = _judged(target)
    b = target.driver.request_batch(target.batch_size)
    found: dict = {"A": [], "B": []}
    _, errors = _send(target, [target.fresh_request(b) for _ in range(ROUND_REQUESTS)])
    if errors:  # a deployment that fails its untimed round has no costs to compare: its failures are the verdict
        return found, errors
    last = {m: settled_statistics(target.server, m) for m in {target.name, *models}}
    for label in ORDER:
        requests = make(label)
        start = time.monotonic()
        ok, failed = _send(target, requests)
        elapsed = time.monotonic() - start
        errors += failed
        own = counted(target.server, target.name, last[target.name], ok)
        now = {m: own if m == target.name else settled_statistics(target.server, m, 0.5) for m in last}
        compute_ns = sum(stats_delta(now[m], last[m]).get("execution_ns", 0) for m in models)
        last = now
        samples = max(ok * b, 1)
        found[label].append({"requests": len(requests), "failed": len(failed),
                             "compute_ms_per_inference": compute_ns / 1e6 / samples,
                             "wall_ms_per_inference": elapsed * 1e3 / samples,
                             "inferences_per_s": ok * b / elapsed if elapsed > 0 else 0.0})
    return found, errors


def _compare(found: dict) -> dict:
    """The conditions' costs per inference (server compute, or wall time where the server counted none), their
    medians and relative spreads, the gap and whether it is decisive (see the module docstring)."""
    server = all(r["compute_ms_per_inference"] > 0 for rounds in found.values() for r in rounds)
    key = "compute_ms_per_inference" if server else "wall_ms_per_inference"
    costs = {label: [r[key] for r in rounds] for label, rounds in found.items()}
    median = {label: float(np.median(c)) for label, c in costs.items()}
    spread = max((max(c) - min(c)) / median[label] if median[label] > 0 else 0.0 for label, c in costs.items())
    fast, slow = sorted(costs, key=lambda label: median[label])
    gap = median[slow] / max(median[fast], 1e-9) - 1  # every cost > 0: the server's, else the wall time's
    decisive = (max(costs[fast]) < min(costs[slow]) and gap > MIN_GAP and gap > CLEAR * spread
                and median[slow] - median[fast] > FLOOR_MS)
    return {"measure": "server compute" if server else "wall time", "costs_ms": {k: [round(x, 4) for x in v]
                                                                                 for k, v in costs.items()},
            "median_ms": {k: round(v, 4) for k, v in median.items()}, "spread": round(spread, 3),
            "gap": round(gap, 3), "faster": fast, "decisive": decisive}


def _verdict(model: str, check: str, declared: str, names: dict, found: dict, errors: list,
             failing: str | None, why: tuple[str, str] = ("", ""), again: dict | None = None) -> CheckResult:
    """The rounds of ``model`` judged (as :func:`_rounds` found them, with its errors): ``names`` says each label in
    words; ``failing`` the label whose decisive speed fails (None: either); ``why`` the words before and after a
    decisive gap's reason; ``again`` the second set of rounds :func:`_judged_rounds` took where the first was
    decisive (None: none taken), which must be decisive the same way for the gap to fail."""
    if not any(found.values()):  # the untimed round failed: nothing to compare
        return CheckResult(model, check, declared, f"{len(errors)} requests of the first round failed", "fail",
                           f"{len(errors)} requests failed ({errors[0]})", {"failed": len(errors)})
    judged = _compare(found)
    med, costs = judged["median_ms"], judged["costs_ms"]
    rounds = sum(len(r) for r in found.values())
    evidence = {**judged, "rounds": {names[k]: v for k, v in found.items()}, "order": ORDER,
                "requests_per_round": ROUND_REQUESTS, "concurrency": ROUND_CONCURRENCY, "failed": len(errors)}
    observed = (f"{rounds} alternated rounds of {ROUND_REQUESTS} requests at concurrency {ROUND_CONCURRENCY}, "
                f"{judged['measure']} per inference: " + ", ".join(
                    f"{names[k]} {med[k]:.3g} ms (rounds {costs[k]})" for k in "AB")
                + f"; gap {judged['gap']:.0%}, rounds' spread {judged['spread']:.0%}")
    problems = [f"{len(errors)} requests failed ({errors[0]})"] if errors else []
    fast, slow = judged["faster"], "B" if judged["faster"] == "A" else "A"
    decisive, repeated = judged["decisive"], ""
    if again is not None and any(again.values()):
        second = _compare(again)
        confirmed = second["decisive"] and second["faster"] == fast
        evidence["second_set"] = {**second, "rounds": {names[k]: v for k, v in again.items()}, "confirmed": confirmed}
        observed += (f"; a second set of {sum(len(r) for r in again.values())} rounds: "
                     + ", ".join(f"{names[k]} {second['median_ms'][k]:.3g} ms" for k in "AB")
                     + f", gap {second['gap']:.0%}, spread {second['spread']:.0%}, "
                     + ("decisive the same way" if confirmed else
                        "not decisive the same way (the first set's gap was the host's, not the model's)"))
        decisive = decisive and confirmed
        repeated = f", and again in a second set of rounds ({second['gap']:.0%} apart)" if confirmed else ""
    if decisive and failing in (None, fast):
        problems.append(f"{why[0]}{names[fast]} cost {med[fast]:.3g} ms per inference against {med[slow]:.3g} ms for "
                        f"{names[slow]} ({judged['measure']}): {judged['gap']:.0%} apart, beyond {CLEAR:g}x the "
                        f"rounds' own spread ({judged['spread']:.0%}), every round of one beyond every round of "
                        f"the other{repeated}{why[1]}")
    return CheckResult(model, check, declared, observed, "fail" if problems else "pass", "; ".join(problems),
                       evidence)


def _judged_rounds(target: Target, make, failing: str | None) -> tuple[dict, list, dict | None]:
    """:func:`_rounds`, and a second set of them where the first is decisive and its faster label is one that fails
    (``failing``, None: either): (the first set, the errors of both, the second set or None)."""
    found, errors = _rounds(target, make)
    if errors or not any(found.values()):
        return found, errors, None
    first = _compare(found)
    if not (first["decisive"] and failing in (None, first["faster"])):
        return found, errors, None
    again, more = _rounds(target, make)
    return found, errors + more, again


def check_test04(target: Target) -> CheckResult:
    declared = "no response_cache: one input repeated is computed like inputs never seen (MLPerf TEST04)"
    if _cached(target):
        return CheckResult(target.name, "test04", f"response_cache {{ enable: true }} ({_cached(target)})", "-",
                           "skipped", "response_cache enabled: repeated inputs are meant to be answered from it "
                           "(the cache check judges that)")
    b = target.driver.request_batch(target.batch_size)

    def make(label: str) -> list:
        if label == "A":
            return [target.fresh_request(b)] * ROUND_REQUESTS
        return [target.fresh_request(b) for _ in range(ROUND_REQUESTS)]

    found, errors, again = _judged_rounds(target, make, failing="A")
    return _verdict(target.name, "test04", declared, {"A": "one input repeated", "B": "inputs never sent before"},
                    found, errors, failing="A",
                    why=("", ": no response_cache is declared, so something answers repeats without computing them"),
                    again=again)


def check_test05(target: Target) -> CheckResult:
    b = target.driver.request_batch(target.batch_size)
    streams = {"A": itertools.count(SEED_A), "B": itertools.count(SEED_B)}
    declared = (f"throughput independent of the input data: seed stream {SEED_A} against {SEED_B} within the "
                f"rounds' own spread (MLPerf TEST05)")

    def make(label: str) -> list:
        return [target.request(b, next(streams[label])) for _ in range(ROUND_REQUESTS)]

    found, errors, again = _judged_rounds(target, make, failing=None)
    return _verdict(target.name, "test05", declared, {"A": f"seed {SEED_A} inputs", "B": f"seed {SEED_B} inputs"},
                    found, errors, failing=None, why=("throughput depends on the input seed: ", ""), again=again)
