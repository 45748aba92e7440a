"""Accuracy of the deployments whose answer is more than one response to one request.

- **Sequence models**: each sequence's outputs, sent interleaved with the others under load, must equal the same
  sequence sent alone: the routing and state check (a sequence batcher that mixed up slots, a model that keyed its
  state wrongly, an ``oldest`` batch that leaked one sequence's state into another all show here), which no load
  generator makes. The sequences' steps come from the input data (perf_analyzer's steps, in order), their lengths
  from the sequence settings.
- **Decoupled models**: each request's whole sequence of responses (how many, and every output of each, in order)
  sent multiplexed with the others on one stream must equal the same request sent alone, and, where a reference is
  given (``reference(inputs) -> [responses]``, e.g. a user's Python callable), equal the reference's.

Both give an :class:`~tritonsuite.judge.accuracy.AccuracyResult` whose metrics count what differs (threshold 0) and
name the first difference.
"""
from __future__ import annotations

import time
from typing import Callable, Mapping, Sequence

import numpy as np

from tritonsuite.core.spec import Metric
from tritonsuite.core.tensors import answer_difference
from tritonsuite.judge.accuracy import AccuracyResult
from tritonsuite.load.client import as_sent
from tritonsuite.load.kinds import driver_for

DEFAULT_TOLERANCE = (1e-5, 1e-5)  # floating outputs (an oldest batch may sum in another order); others: exact


def compare_runs(got: Sequence[Sequence[Mapping[str, np.ndarray]]],
                 expected: Sequence[Sequence[Mapping[str, np.ndarray]]], unit: str, item: str,
                 tolerances: Mapping[str, tuple[float, float]] | None = None) -> tuple[int, int, str]:
    """(units that differ, items compared, the first difference) between two runs of the same units (sequences or
    requests), each a list of items (steps or responses) of decoded outputs."""
    tolerances = tolerances or {}
    differ, compared, first = 0, 0, ""
    for u, (g, e) in enumerate(zip(got, expected)):
        compared += min(len(g), len(e))
        _, why = answer_difference(g, e, item, lambda name, dtype: tolerances.get(name, DEFAULT_TOLERANCE))
        if why:
            differ += 1
            first = first or f"{unit} {u}: {why}"
    return differ, compared, first


def sequence_accuracy(server, deployment, precision: str, sequences: Sequence[Sequence[Mapping[str, np.ndarray]]],
                      outputs: Sequence[str], protocol: str = "grpc",
                      tolerances: Mapping[str, tuple[float, float]] | None = None, description: str = "",
                      first_id: int = 1) -> AccuracyResult:
    """Every sequence sent together (interleaved, each on its own connection), then each alone; their outputs
    compared step by step. ``deployment``: the sequence model's description."""
    from tritonsuite.load.exchange import send_sequences

    t0 = time.perf_counter()
    together = send_sequences(server, deployment, sequences, outputs, protocol, together=True, first_id=first_id)
    alone = send_sequences(server, deployment, sequences, outputs, protocol, together=False,
                           first_id=first_id + len(sequences))
    model = deployment.name
    differ, steps, first = compare_runs(together, alone, "sequence", "step", tolerances)
    metric = Metric("sequences whose outputs interleaved under load differ from the sequence sent alone",
                    float(differ), 0.0, higher_is_better=False, worst=first)
    result = AccuracyResult(model=model, deployment=model, precision=precision, samples=steps, comparisons=[],
                            metrics=[metric], seconds=time.perf_counter() - t0,
                            description=description or f"{len(sequences)} sequences ({steps} steps) sent "
                                        f"interleaved on {len(sequences)} connections, then each alone")
    result.failures += [f"{metric.describe()}"] if not metric.passed else []
    return result


def stream_accuracy(server, model: str, precision: str, requests: Sequence[Mapping[str, np.ndarray]],
                    outputs: Sequence[str], reference: Callable | None = None,
                    tolerances: Mapping[str, tuple[float, float]] | None = None,
                    description: str = "") -> AccuracyResult:
    """Every request multiplexed on one stream and each alone: the whole sequences of responses compared; and with
    the reference's, where one is given."""
    from tritonsuite.load.streams import exchange_alone

    t0 = time.perf_counter()
    url = server.grpc_url
    bound = server.request_timeout_s
    together = exchange_alone(url, model, requests, outputs, bound, together=True, access=server.access)
    alone = exchange_alone(url, model, requests, outputs, bound, together=False, access=server.access)
    differ, responses, first = compare_runs(together, alone, "request", "response", tolerances)
    metrics = [Metric("requests whose responses under load differ from the request sent alone", float(differ), 0.0,
                      higher_is_better=False, worst=first)]
    if reference is not None:
        expected = [list(reference({k: np.asarray(v) for k, v in r.items()})) for r in requests]
        off, _, worst = compare_runs(alone, expected, "request", "response", tolerances)
        metrics.append(Metric("requests whose responses differ from the reference's", float(off), 0.0,
                              higher_is_better=False, worst=worst))
    counts = [len(a) for a in alone]
    result = AccuracyResult(model=model, deployment=model, precision=precision, samples=responses, comparisons=[],
                            metrics=metrics, seconds=time.perf_counter() - t0,
                            description=description or f"{len(requests)} requests ({sum(counts)} responses, "
                                        f"{min(counts, default=0)}-{max(counts, default=0)} per request) "
                                        f"multiplexed on one stream, then each alone"
                                        + ("; and against the reference" if reference is not None else ""))
    result.failures += [m.describe() for m in metrics if not m.passed]
    return result


# ------------------------------------------------------------------------------ the suite's seam for these kinds
ACCURACY_SEQUENCES = 4  # sequences sent interleaved (and then alone) by the accuracy run of a sequence model
ACCURACY_REQUESTS = 16  # requests of a decoupled model's accuracy run


def composing_models(deployment, bls_composing: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """The models a python (BLS) deployment calls, as the user named them (``--bls-composing-models``, for this
    deployment or for every one); none for other backends."""
    if getattr(deployment, "backend", "") != "python":
        return ()
    return tuple(bls_composing.get(deployment.name) or bls_composing.get("") or ())


def judged_by_kind(description, spec) -> bool:
    """Whether a deployment's accuracy is this module's: one its driver judges by whole exchanges (a sequence or
    decoupled model), or a python model with no reference file (nothing runs its model.py in-process: its
    validation_data judge it)."""
    return bool(driver_for(description).accuracy) or (description.python and not reference_file(spec))


def reference_file(spec) -> str | None:
    """The file a team named to judge its deployment's answers against (``--reference NAME=FILE``), if any."""
    return spec.served_from.reference if spec.served_from is not None else None


def _samples(inputs: Mapping[str, np.ndarray], batching: bool) -> list[dict[str, np.ndarray]]:
    """Each sample of ``inputs`` (batch first) as one request sends it (:func:`tritonsuite.load.client.as_sent`)."""
    count = len(next(iter(inputs.values())))
    return [as_sent({k: v[i:i + 1] for k, v in inputs.items()}, batching) for i in range(count)]


def kind_accuracy(server, description, spec, precision: str, data, protocol: str = "grpc") -> AccuracyResult:
    """The accuracy run of a sequence, decoupled or python deployment (see the module docstring); ``data`` is the
    spec's AccuracyData (its inputs, one sample per request); a sequence model's sequences are sent as its
    description's settings say."""
    from tritonsuite.deploy.export import ExportUnsupported

    samples = _samples(data.inputs, description.batching)
    outputs = [t.name for t in spec.outputs]
    tolerances = dict((spec.tolerances or {}).get(precision, {}))
    named = reference_file(spec)
    if named and str(named).endswith(".py"):  # its responses as the user's reference(inputs) gives them
        from tritonsuite.deploy.pyreference import reference_callable

        reference = reference_callable(named)
    else:
        reference = spec.build(None) if named else None
    judged = _BY_EXCHANGES.get(driver_for(description).accuracy)
    if judged is not None:  # by whole exchanges, as its kind says its answers come
        return judged[0](server, description, precision, samples, outputs, protocol, tolerances, reference, data)
    # a python model without a reference: its outputs against validation_data
    client = server.grpc_client() if protocol == "grpc" else server.client()
    try:
        from tritonsuite.core.tensors import run_batched
        from tritonsuite.load.client import served_infer

        t0 = time.perf_counter()
        infer = served_infer(client, description.name, spec, batched=description.batching,
                             timeout_s=server.request_timeout_s)
        served = run_batched(infer, data.inputs, 1 if not description.batching
                             else max(1, min(description.max_batch_size, 8)))
    finally:
        client.close()
    metrics = data.score(served, served, precision)
    if not metrics:
        raise ExportUnsupported(f"{description.name} is a python-backend model with neither validation_data in its "
                                f"--input-data nor a --reference {description.name}=FILE: nothing to judge it against")
    result = AccuracyResult(model=description.name, deployment=description.name, precision=precision,
                            samples=len(samples), comparisons=[], metrics=metrics, seconds=time.perf_counter() - t0,
                            description=f"{data.description}; judged against its validation_data")
    result.failures += [m.describe() for m in metrics if not m.passed]
    return result


def reference_name(description, spec) -> str:
    """What an accuracy row was judged against, in words."""
    if not judged_by_kind(description, spec):
        return "fp32 eager model on the CPU"  # every precision is judged against fp32
    judged = _BY_EXCHANGES.get(driver_for(description).accuracy)
    if judged is None:
        return "validation_data"
    return judged[1] + (" and the reference file" if judged[0] is _by_streams and reference_file(spec) else "")


def _by_sequences(server, description, precision, samples, outputs, protocol, tolerances, reference,
                  data) -> AccuracyResult:
    from tritonsuite.load.kinds.sequence import draw_length

    settings = description.sequence_settings()
    rng = np.random.default_rng(settings.seed)
    runs = [[samples[(j + i) % len(samples)] for i in range(draw_length(rng, settings))]
            for j in range(ACCURACY_SEQUENCES)]
    return sequence_accuracy(server, description, precision, runs, outputs, protocol, tolerances,
                             f"{len(runs)} sequences ({sum(map(len, runs))} steps, {settings.describe()}) of "
                             f"{data.description} sent interleaved, then each alone", first_id=settings.id_start)


def _by_streams(server, description, precision, samples, outputs, protocol, tolerances, reference,
                data) -> AccuracyResult:
    return stream_accuracy(server, description.name, precision, samples[:ACCURACY_REQUESTS], outputs, reference,
                           tolerances)


#: how a kind whose accuracy is judged by whole exchanges (its driver's ``accuracy``: the unit its answers come in)
#: is judged, and what it is judged against in words
_BY_EXCHANGES = {"sequences": (_by_sequences, "each sequence sent alone"),
                 "streams": (_by_streams, "each request sent alone")}
