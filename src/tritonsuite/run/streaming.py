"""The suite's streaming example of a shipped model (a spec with a ``stream``): ``<deployment>_stream``, a python
decoupled model written beside the online deployment (:mod:`tritonsuite.deploy.streaming`), loaded, and verified
before it is measured. Deploying happens here, on the run's floor; :mod:`tritonsuite.judge.responses` only judges."""
from __future__ import annotations

from tritonsuite.deploy.streaming import STREAM_SUFFIX, chunked_reference, stream_deployment
from tritonsuite.judge.responses import stream_accuracy

__all__ = ["STREAM_SUFFIX", "streamed"]


def streamed(server, inner, precision: str) -> dict:
    """The streaming example of a written and loaded deployment ``inner`` (a suite Deployment whose spec has a
    ``stream``): ``<inner>_stream`` written beside it and loaded, then checked before it is measured: the streamed
    responses of the spec's example requests must equal the deployment's own unary answer chunked the same way.
    Returns the Deployment fields that differ from ``inner``'s (a stream fails in one line naming the request)."""
    from tritonsuite.deploy.export import ExportUnsupported
    from tritonsuite.load.client import served_infer

    spec = inner.spec
    if not spec.stream:
        raise ExportUnsupported(f"{spec.key} has no streaming example (its spec names no stream)")
    directory = stream_deployment(inner.directory, spec.stream)
    name = server.load(directory)
    client = server.client()
    try:
        unary = served_infer(client, inner.name, spec, batched=inner.batched)
        check = stream_accuracy(server, name, precision, [spec.example_inputs(1, seed) for seed in range(4)],
                                [t.name for t in spec.outputs],
                                lambda inputs: chunked_reference(unary(inputs), spec.stream),
                                dict((spec.tolerances or {}).get(precision, {})))
    finally:
        client.close()
    if not check.passed:
        raise ValueError(f"{name}: the streamed responses are not the unary answer chunked: {check.failures[0]}")
    served = server.model_description(name)  # written by the suite, declared as served (no conformance runs on it)
    return {"name": name, "directory": directory, "served_by": server.backend_description(name),
            "description": served, "declared": served}
