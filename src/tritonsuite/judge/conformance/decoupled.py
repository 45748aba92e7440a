"""Check ``decoupled``: ``model_transaction_policy { decoupled: true }`` as the live server streams it.

A decoupled model answers a request with any number of responses on a gRPC stream (``ModelStreamInfer``) and ends
it with a response flagged ``triton_final_response``. The load's transport (:mod:`tritonsuite.load.streams`) stops
listening for a request at its first final response; this check, on the same stream client
(:class:`~tritonsuite.load.streams.ModelStream`), keeps listening. It opens one stream, sends
:data:`REQUESTS` requests at once (seeds 0, 1, ...: a test's ``Target.inputs`` may make some of them ask for no
response at all), each with its own ``id`` and ``triton_enable_empty_final_response`` (so a final flag the model
sends alone still reaches the client), and records every message until each request has had its final flag and
:data:`LINGER_S` more passed (responses after a final one), or no message came for :data:`IDLE_S` while a request was
still open (a model that never ends its stream: the wait is bounded), or :data:`TOTAL_S` passed.

Passes when every request got exactly one final flag, no response after it, no error, and every response that is
not the empty final one carries each declared output. Fails naming the first problem of each kind (a second final
flag, none within the bound, a response after the final, a missing output, an error), and where the server serves
the model as not decoupled although the configuration declares it. Skipped for a deployment that does not declare
decoupled (one response per request: the other checks' requests judge it).

Seen on r24.10's python backend: a model cannot send a second final flag nor a response after it (the stub raises
``TritonModelException('Unable to send response. Response sender has been closed.')`` in the model); other backends
are judged by what reaches the stream.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from tritonsuite.core.access import PLAIN, Access
from tritonsuite.judge.conformance.result import CheckResult, Target
from tritonsuite.core.reasons import reason
from tritonsuite.load.client import batch_first
from tritonsuite.load.interrupt import within

#: reasons are also written to these names (tritonsuite.core.reasons)
REASON_NAMES = ("stray",)
REQUESTS = 8
IDLE_S = 10.0  # no message for this long while a request is still open: its final flag never came
TOTAL_S = 120.0  # the whole exchange's bound
LINGER_S = 0.5  # kept listening after the last final flag, for responses that come after it


#: every failure reason this check gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("the server closed the stream",
           "unit/test_judge_decoupled.py::test_decoupled_fails_a_stream_closed_answered_strangely_or_failed"),
    reason("a response for unknown request id {}: {}",
           "unit/test_judge_decoupled.py::test_decoupled_fails_a_stream_closed_answered_strangely_or_failed"),
    reason("the stream failed with gRPC {}: {}",
           "unit/test_judge_decoupled.py::test_decoupled_fails_a_stream_closed_answered_strangely_or_failed"),
    reason("the server serves model_transaction_policy.decoupled false",
           "test_conformance_fields.py::test_decoupled_catches_a_model_served_as_not_decoupled",
           "unit/test_judge_decoupled.py::test_decoupled_fails_a_model_served_as_not_decoupled"),
    reason("{} of {} requests got no final flag ({}: no message for {} s after {} response(s))",
           "test_conformance_fields.py::test_decoupled_catches_a_stream_that_never_ends_in_bounded_time",
           "unit/test_judge_decoupled.py::test_decoupled_fails_requests_that_got_no_final_flag"),
    reason("{} request(s) got more than one final flag ({}: {})",
           "unit/test_judge_decoupled.py::test_decoupled_fails_a_request_with_a_second_final_flag"),
    reason("{} request(s) got a response after their final one ({})",
           "unit/test_judge_decoupled.py::test_decoupled_fails_a_response_after_the_final_one"),
    reason("{} response(s) without the declared outputs {} ({})",
           "test_conformance_fields.py::test_decoupled_catches_responses_without_the_declared_outputs",
           "unit/test_judge_decoupled.py::test_decoupled_fails_responses_without_the_declared_outputs"),
    reason("{} request(s) got an empty response not flagged final ({})",
           "unit/test_judge_decoupled.py::test_decoupled_fails_an_empty_response_not_flagged_final"),
    reason("{} request(s) answered with an error ({})",
           "unit/test_judge_decoupled.py::test_decoupled_fails_requests_answered_with_an_error"),
)


@dataclass
class _Stream:
    """What one request's stream carried, in arrival order."""

    sent: float
    responses: list = field(default_factory=list)  # (seconds after sent, output names, final flag)
    errors: list = field(default_factory=list)

    @property
    def finals(self) -> int:
        return sum(final for _, _, final in self.responses)


def _requests(target: Target, grpc_url: str) -> list[bytes]:
    from tritonsuite.load.exchange import flagged, prepare

    batched = target.driver.batched
    found = []
    for seed in range(REQUESTS):
        tensors = batch_first(target.request(target.batch_size, seed), target.description.batching)
        request = prepare(grpc_url, target.name, tensors, target.output_names, True, batched)
        if target.driver.sequenced:  # a sequence model's request: a sequence of one, its own correlation id
            request = flagged(request, True, (90_000 + seed, True, True))
        found.append(request.data)
    return found


async def _exchange(url: str, bodies: list[bytes], access: Access = PLAIN) -> tuple[dict[str, _Stream], list[str],
                                                                                    float]:
    """Send every request on one stream (the suite's one stream client, :class:`tritonsuite.load.streams.ModelStream`)
    and keep every message (see the module docstring); returns each request's stream by id, the stream's own errors,
    and the seconds it took."""
    import grpc

    from tritonsuite.load.streams import ModelStream

    client = ModelStream(url, access)
    streams: dict[str, _Stream] = {}
    stray: list[str] = []
    start = time.monotonic()
    try:
        for i, body in enumerate(bodies):
            request_id = f"conformance-{i}"
            streams[request_id] = _Stream(time.perf_counter())
            await client.send(body, request_id)
        quiet_until = None
        while time.monotonic() - start < TOTAL_S:
            if quiet_until is None and all(s.finals for s in streams.values()):
                quiet_until = time.monotonic() + LINGER_S  # every final flag came: LINGER_S more, then done
            wait = IDLE_S if quiet_until is None else max(quiet_until - time.monotonic(), 0.0)
            try:
                response = await within(client.receive(), wait)
            except asyncio.TimeoutError:
                break
            if response is None:
                stray.append("the server closed the stream")
                break
            stream = streams.get(response.request_id)
            if stream is None:
                stray.append(f"a response for unknown request id {response.request_id!r}: {response.error}"[:200])
                continue
            if response.error:
                stream.errors.append(response.error.splitlines()[0][:200])
                continue
            names = sorted(o.name for o in response.infer.outputs)
            stream.responses.append((round(response.at - stream.sent, 4), names, response.final))
    except grpc.aio.AioRpcError as exc:
        stray.append(f"the stream failed with gRPC {exc.code().name}: {exc.details()}"[:200])
    finally:
        await client.close()
    return streams, stray, time.monotonic() - start


def _served_decoupled(target: Target) -> bool | None:
    try:
        config = target.server.model_config(target.name)
    except Exception:
        return None
    return bool((config.get("model_transaction_policy") or {}).get("decoupled"))


def _judge_streams(streams: dict[str, _Stream], stray: list[str], served: bool | None, names: list[str]) -> list[str]:
    """What the decoupled check saw wrong: ``streams``: each request's messages by id, ``stray``: the stream's own
    errors, ``served``: whether the server serves the model as decoupled (None: not known), ``names``: the declared
    outputs, sorted. The first problem of each kind, as :func:`check_decoupled` says them."""
    problems: list[str] = []
    if served is False:
        problems.append("the server serves model_transaction_policy.decoupled false")
    problems += stray[:1]
    never = [i for i, s in streams.items() if not s.finals and not s.errors]
    twice = [i for i, s in streams.items() if s.finals > 1]
    after, missing, empty, errors = [], [], [], []
    for i, s in streams.items():
        if s.errors:
            errors.append(f"{i}: {s.errors[0]}")
        seen_final = False
        for at, outputs, final in s.responses:
            if seen_final:
                after.append(i)
                break
            seen_final = final
            if outputs and outputs != names:
                missing.append(f"{i} carried {outputs}")
            elif not outputs and not final:
                empty.append(i)
    if never:
        problems.append(f"{len(never)} of {len(streams)} requests got no final flag ({never[0]}: no message for "
                        f"{IDLE_S:g} s after {len(streams[never[0]].responses)} response(s))")
    if twice:
        problems.append(f"{len(twice)} request(s) got more than one final flag ({twice[0]}: "
                        f"{streams[twice[0]].finals})")
    if after:
        problems.append(f"{len(after)} request(s) got a response after their final one ({after[0]})")
    if missing:
        problems.append(f"{len(missing)} response(s) without the declared outputs {names} ({missing[0]})")
    if empty:
        problems.append(f"{len(empty)} request(s) got an empty response not flagged final ({empty[0]})")
    if errors:
        problems.append(f"{len(errors)} request(s) answered with an error ({errors[0]})")
    return problems


def check_decoupled(target: Target) -> CheckResult:
    d = target.description
    if not d.decoupled:
        return CheckResult(target.name, "decoupled", "model_transaction_policy.decoupled false (Triton's default)",
                           "-", "skipped", "not decoupled: one response per request, judged by the other checks' "
                                           "requests")
    names = sorted(target.output_names)
    declared = (f"decoupled: each of {REQUESTS} requests on one stream ends with exactly one triton_final_response, "
                f"no response after it, each response carrying {names}")
    streams, stray, seconds = asyncio.run(_exchange(target.server.grpc_url, _requests(target, target.server.grpc_url),
                                                           target.server.access))
    served = _served_decoupled(target)
    problems = _judge_streams(streams, stray, served, names)
    counts = [sum(bool(o) for _, o, _ in s.responses) for s in streams.values()]
    evidence = {"requests": len(streams), "seconds": round(seconds, 3), "served_decoupled": served,
                "responses_with_outputs": counts, "final_flags": [s.finals for s in streams.values()],
                "requests_without_output_responses": sum(c == 0 for c in counts),
                "stream_errors": stray, "samples": {i: s.responses[:4] for i, s in list(streams.items())[:3]}}
    observed = (f"{len(streams)} requests on one stream in {seconds:.2f} s: responses with outputs per request "
                f"{counts}, final flags {evidence['final_flags']}")
    return CheckResult(target.name, "decoupled", declared, observed, "fail" if problems else "pass",
                       "; ".join(problems), evidence)
