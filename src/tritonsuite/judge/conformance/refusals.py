"""Check 4, refusals: malformed requests are refused cleanly and harmlessly, over HTTP and gRPC (a decoupled model:
on a gRPC stream, the only way it takes requests).

Each malformed request is written on the wire by hand (HTTP: the binary tensor extension's JSON header and raw
bytes; gRPC: a ``ModelInferRequest`` with ``raw_input_contents``, unary or as a stream's message), so a truncated
or oversized body is exactly that, not something a client library would refuse before sending. It must come back as
an error (HTTP 4xx, gRPC INVALID_ARGUMENT or another non-OK status, a stream's response with its error message)
whose message names the problem, within :data:`BOUND_S`; right after, the server is live, the model ready, and a
reference request is answered exactly as before.
"""
from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass

import numpy as np

from tritonsuite.judge.conformance.result import CheckResult, Target
from tritonsuite.judge.conformance.traffic import answered, same
from tritonsuite.core.reasons import reason

#: functions that return reasons (tritonsuite.core.reasons)
REASON_FUNCTIONS = ("harm",)
BOUND_S = 10.0  # an error later than this is a hang
DYING_S = 2.0  # a connection refused after a probe: how long the server's process is given to be seen gone
#: a dtype of the same item size (so the bytes fit and only the type is wrong)
OTHER_DTYPE = {"FP32": "INT32", "INT32": "FP32", "FP16": "INT16", "INT16": "FP16", "FP64": "INT64",
               "INT64": "FP64", "UINT8": "INT8", "INT8": "UINT8", "BOOL": "INT8", "UINT32": "INT32",
               "UINT64": "INT64", "UINT16": "INT16", "BF16": "FP16", "BYTES": "INT32"}
#: words an error about each problem names (any of them, case-insensitive)
NAMES = {"batch above max_batch_size": ("batch",), "wrong dtype": ("datatype", "data-type", "data type", "dtype"),
         "wrong shape": ("shape", "dims"), "missing input": ("input",), "unknown output": ("output",),
         "truncated body": ("byte", "size", "unexpected", "expected"),
         "oversized body": ("byte", "size", "unexpected", "expected"),
         "other size of a variable dim": ()}
#: problems a deployment may also answer (the configuration allows them): only harm afterwards fails them
MAY_ANSWER = ("other size of a variable dim",)


#: every failure reason this check gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("the server died",
           "unit/test_judge_refusals.py::test_a_died_server_is_the_first_thing_wrong",
           "unit/test_judge_refusals.py::test_a_probe_after_which_the_server_died_is_judged_by_that_alone",
           "test_conformance_refusals.py::test_refusals_say_the_server_died_after_the_probe_that_killed_it"),
    reason("the server is not live",
           "unit/test_judge_refusals.py::test_a_server_that_is_not_live"),
    reason("the model is not ready",
           "unit/test_judge_refusals.py::test_a_model_that_is_not_ready"),
    reason("the reference request failed ({})",
           "unit/test_judge_refusals.py::test_a_reference_request_that_failed_says_the_first_line_of_why"),
    reason("the reference request was answered differently than before",
           "unit/test_judge_refusals.py::test_a_reference_answered_differently"),
    reason("{}: afterwards {}",
           "unit/test_judge_refusals.py::test_harm_afterwards_fails_a_probe_the_configuration_allows_it_to_answer",
           "test_conformance_checks.py::test_refusals_catch_a_model_that_dies_on_bad_input",
           "test_conformance_refusals.py::test_refusals_say_the_server_died_after_the_probe_that_killed_it"),
    reason("{}: not refused: {} ({})",
           "unit/test_judge_refusals.py::test_a_probe_accepted_is_not_refused",
           "unit/test_judge_refusals.py::test_a_probe_with_no_answer_is_not_refused"),
    reason("{}: error {} does not name the problem: {}",
           "unit/test_judge_refusals.py::test_an_error_that_does_not_name_the_problem"),
    reason("{}: refused after {} s (bound {} s)",
           "unit/test_judge_refusals.py::test_a_refusal_after_the_bound_is_a_hang_one_at_the_bound_is_not"),
)


@dataclass
class Tensor:
    name: str
    datatype: str
    shape: list[int]
    data: bytes


def _wire(array: np.ndarray) -> bytes:
    if array.dtype == object:
        return b"".join(len(v).to_bytes(4, "little") + bytes(v) for v in array.flat)
    return np.ascontiguousarray(array).tobytes()


def probes(target: Target) -> list[tuple[str, list[Tensor], list[str]]]:
    """(problem, the request's tensors, requested outputs) for every malformed request that applies."""
    from tritonclient.utils import np_to_triton_dtype

    d = target.description
    request = target.request(1)
    good = [Tensor(n, np_to_triton_dtype(a.dtype), list(a.shape), _wire(a))  # (an object array's: BYTES)
            for n, a in request.items()]
    outputs = [t.name for t in d.outputs]
    first = good[0]
    found = []
    if d.batching:
        over = d.max_batch_size + 1
        found.append(("batch above max_batch_size", [
            Tensor(t.name, t.datatype, [over] + t.shape[1:], t.data * over) for t in good], outputs))
    found.append(("wrong dtype", [Tensor(first.name, OTHER_DTYPE.get(first.datatype, "FP32"), first.shape,
                                         first.data)] + good[1:], outputs))
    spec = d.input(first.name)
    offset = 1 if d.batching else 0
    fixed = [i for i, dim in enumerate(spec.shape) if dim > 0]
    if fixed:
        shape = list(first.shape)
        shape[offset + fixed[0]] += 1
    else:
        shape = list(first.shape) + [2]
    elements = int(np.prod(shape))  # (of no dims: 1)
    itemsize = len(first.data) // max(int(np.prod(first.shape)), 1)
    data = (first.data * (elements // max(len(first.data) // max(itemsize, 1), 1) + 1))[:elements * itemsize]
    found.append(("wrong shape", [Tensor(first.name, first.datatype, shape, data)] + good[1:], outputs))
    for index, tensor in enumerate(good):  # the first input with a variable dim: any size of it is valid, so it
        dims = d.input(tensor.name).shape  # reaches the model, which must answer or refuse it, unharmed
        variable = [i for i, dim in enumerate(dims) if dim < 0]
        if not variable:
            continue
        shape = list(tensor.shape)
        shape[offset + variable[0]] += 1
        size = len(tensor.data) // max(int(np.prod(tensor.shape)), 1)
        wanted = int(np.prod(shape)) * size
        data = (tensor.data * (wanted // max(len(tensor.data), 1) + 1))[:wanted]
        found.append(("other size of a variable dim", good[:index] + [Tensor(tensor.name, tensor.datatype, shape,
                                                                             data)] + good[index + 1:], outputs))
        break
    found.append(("missing input", good[1:], outputs))
    found.append(("unknown output", good, outputs[:1] + ["conformance_no_such_output"]))
    cut = max(len(first.data) // 2, 1) if len(first.data) > 1 else 0
    found.append(("truncated body", [Tensor(first.name, first.datatype, first.shape, first.data[:cut])]
                  + good[1:], outputs))
    found.append(("oversized body", [Tensor(first.name, first.datatype, first.shape, first.data + first.data)]
                  + good[1:], outputs))
    return found


def send_http(server, model: str, tensors: list[Tensor], outputs: list[str]) -> tuple[int, str]:
    header = json.dumps({
        "inputs": [{"name": t.name, "shape": t.shape, "datatype": t.datatype,
                    "parameters": {"binary_data_size": len(t.data)}} for t in tensors],
        "outputs": [{"name": n, "parameters": {"binary_data": True}} for n in outputs]}).encode()
    body = header + b"".join(t.data for t in tensors)
    host, port = server.http_url.rsplit(":", 1)
    context = server.access.http_ssl_context()
    conn = http.client.HTTPSConnection(host, int(port), timeout=BOUND_S, context=context) if context else \
        http.client.HTTPConnection(host, int(port), timeout=BOUND_S)
    try:
        conn.request("POST", f"/v2/models/{model}/infer", body=body,
                     headers={"Inference-Header-Content-Length": str(len(header)),
                              "Content-Type": "application/octet-stream", **server.access.header_dict()})
        response = conn.getresponse()
        text = response.read()
        if response.status == 200:
            return 200, ""
        try:
            return response.status, str(json.loads(text).get("error", text[:300]))
        except ValueError:
            return response.status, text[:300].decode("utf-8", "replace")
    finally:
        conn.close()


def _grpc_request(model: str, tensors: list[Tensor], outputs: list[str], request_id: str = ""):
    """The malformed request as a ``ModelInferRequest`` (its tensors' bytes as ``raw_input_contents``)."""
    from tritonclient.grpc import service_pb2

    request = service_pb2.ModelInferRequest(model_name=model, id=request_id)
    for t in tensors:
        request.inputs.add(name=t.name, datatype=t.datatype, shape=t.shape)
        request.raw_input_contents.append(t.data)
    for n in outputs:
        request.outputs.add(name=n)
    return request


def send_grpc(server, model: str, tensors: list[Tensor], outputs: list[str]) -> tuple[str, str]:
    import grpc
    from tritonclient.grpc import service_pb2_grpc

    request = _grpc_request(model, tensors, outputs)
    with server.access.grpc_channel(server.grpc_url, aio=False) as channel:
        try:
            service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(
                request, timeout=BOUND_S, metadata=server.access.grpc_metadata() or None)
        except grpc.RpcError as exc:
            return exc.code().name, str(exc.details())
    return "OK", ""


def send_stream(server, model: str, tensors: list[Tensor], outputs: list[str]) -> tuple[str, str]:
    """The malformed request on a gRPC stream (a decoupled model's only way in): its first error, or OK once the
    final response came."""
    import grpc
    from tritonclient.grpc import service_pb2_grpc

    request = _grpc_request(model, tensors, outputs, "conformance")
    with server.access.grpc_channel(server.grpc_url, aio=False) as channel:
        try:
            for response in service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelStreamInfer(
                    iter([request]), timeout=BOUND_S, metadata=server.access.grpc_metadata() or None):
                if response.error_message:
                    return "stream error", response.error_message
        except grpc.RpcError as exc:
            return exc.code().name, str(exc.details())
    return "OK", ""


#: how each protocol's probe is sent
SENDERS = {"http": send_http, "grpc": send_grpc, "grpc stream": send_stream}


def protocols(target: Target) -> tuple[str, ...]:
    """The protocols the probes travel: the one the deployment's driver sends on (a decoupled model's gRPC stream),
    else HTTP and, where the server's gRPC port is known, unary gRPC."""
    from tritonsuite.load.point import LoadPoint

    if getattr(target.driver.transport(target.server, BOUND_S, LoadPoint(1)), "streaming", False):
        return ("grpc stream",)
    try:
        target.server.grpc_url
    except ValueError:  # a server known by its HTTP address alone
        return ("http",)
    return ("http", "grpc")


def _healthy(target: Target, conn, reference) -> str:
    """"" when the server is live, the model ready and the reference request answered as before; else why not
    (:func:`harm` judges what was seen, asked in this order and no further than the first thing wrong)."""
    if not target.server.is_alive():
        return harm(alive=False)
    try:
        if not conn.is_server_live():
            return harm(live=False)
        if not conn.is_model_ready(target.name):
            return harm(ready=False)
        answer = answered(target, target.request(1))
    except Exception as exc:
        if _refused_connection(exc) and target.server.gone(DYING_S):
            return harm(alive=False)
        return harm(error=str(exc))
    return harm(same_answer=same(answer, reference))


def _refused_connection(exc: BaseException) -> bool:
    """Whether a request failed at the socket (refused, reset), not with an answer of the server's."""
    return isinstance(exc, OSError) or isinstance(exc.__cause__, OSError)


def harm(alive: bool = True, live: bool = True, ready: bool = True, error: str | None = None,
         same_answer: bool = True) -> str:
    """What the deployment's state after a probe says is wrong, "" when nothing: the server process ``alive``, the
    server ``live``, the model ``ready``, the reference request's ``error`` (None: it was answered), and whether its
    answer is the one given before the probes."""
    if not alive:
        return "the server died"
    if not live:
        return "the server is not live"
    if not ready:
        return "the model is not ready"
    if error is not None:
        return f"the reference request failed ({(error.strip().splitlines() or [''])[0][:200]})"
    return "" if same_answer else "the reference request was answered differently than before"


def judge_probe(what: str, problem: str, code, message: str, took: float, harmed: str) -> list[str]:
    """The reasons one probe fails: ``what`` names it (protocol and problem), ``code`` is what came back (HTTP
    status, gRPC status name, "stream error", "no answer" where the sender raised), ``message`` the error's text,
    ``took`` its seconds, ``harmed`` what :func:`harm` found afterwards ("" nothing). A probe after which the server
    died is judged by that alone (its missing answer is the death's, not a refusal's)."""
    problems = []
    refused = code not in (200, "OK", "no answer")
    named = any(w in message.lower() for w in NAMES[problem])
    if harmed:
        problems.append(f"{what}: afterwards {harmed}")
        if harmed == harm(alive=False):
            return problems
    if problem in MAY_ANSWER:
        pass
    elif not refused:
        problems.append(f"{what}: not refused: {'accepted' if code in (200, 'OK') else code} ({message[:120]})")
    elif not named:
        problems.append(f"{what}: error {code} does not name the problem: {message[:120]!r}")
    elif took > BOUND_S:
        problems.append(f"{what}: refused after {took:.1f} s (bound {BOUND_S:g} s)")
    return problems


def check_refusals(target: Target) -> CheckResult:
    conn = target.server.client()
    problems, seen = [], []
    try:
        reference = answered(target, target.request(1))
        for protocol in protocols(target):
            for problem, tensors, outputs in probes(target):
                start = time.monotonic()
                try:
                    code, message = SENDERS[protocol](target.server, target.name, tensors, outputs)
                except Exception as exc:
                    code, message = "no answer", f"{type(exc).__name__}: {exc}"
                took = time.monotonic() - start
                harmed = _healthy(target, conn, reference)
                seen.append({"protocol": protocol, "problem": problem, "code": code, "message": message[:200],
                             "seconds": round(took, 3), "after": harmed or "healthy, same answer"})
                problems += judge_probe(f"{protocol} {problem}", problem, code, message, took, harmed)
                if harmed and not target.server.is_alive():
                    break
            if not target.server.is_alive():
                break
    finally:
        conn.close()
    kinds = sorted({s["problem"] for s in seen})
    observed = (f"{sum(s['code'] not in (200, 'OK') for s in seen)}/{len(seen)} refused, slowest "
                f"{max((s['seconds'] for s in seen), default=0):.3f} s; "
                f"{sum(s['after'].startswith('healthy') for s in seen)}/{len(seen)} followed by a healthy reference "
                f"answer")
    return CheckResult(target.name, "refusals", f"{len(kinds)} malformed requests ({', '.join(kinds)}) over "
                       f"{' and '.join(sorted({s['protocol'] for s in seen}))}: each refused naming the problem, "
                       f"the deployment unharmed", observed, "fail" if problems else "pass", "; ".join(problems),
                       {"probes": seen})
