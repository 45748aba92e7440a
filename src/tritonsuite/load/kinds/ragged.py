"""A ragged deployment: a batching model whose inputs declare ``allow_ragged_batch`` (Triton's dynamic batcher then
puts requests of different shapes in one execution), often with ``batch_input`` tensors the server makes for each
execution (``BATCH_ELEMENT_COUNT``, ``BATCH_ACCUMULATED_ELEMENT_COUNT``, ...: what the model needs to find each
request in the concatenated batch).

What the kind changes in how the suite drives it:
- its load requests carry *differing* element counts: each request's ragged inputs are cut along their first
  variable dim to one of up to :data:`VARIANTS` lengths (1/n, 2/n, ... all of the request's own), chosen per request
  by a generator seeded with the point's seed. A load of one shape would never make a ragged batch, so the row would
  say nothing about what the deployment was written for. Inputs without ``allow_ragged_batch`` are sent as given;
- a ``batch_input`` target is the server's: Triton refuses a request that carries it ("expected 1 inputs but got 2
  inputs"); a request holding one is refused here first, naming it;
- where it cuts inputs, shared memory is not used (each region is sized for one shape): the point goes over the
  network, with a note;
- accuracy probes ride in its load as they are given (each in place of a load request), their answers judged as a
  stateless deployment's: a request's answer does not depend on the others in its execution.
perf_analyzer has no option that varies shapes (only its ``--input-data`` steps, written from the engine's tensors
by :mod:`tritonsuite.load.perfanalyzer`), so :meth:`Ragged.arguments` adds none.

A sequence model is left to the sequence kind (its requests follow their sequences; the sequence batcher's
``oldest`` strategy batches ragged requests too, but one pattern sends them).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

import numpy as np

from tritonsuite.load.kinds.base import Kind

#: ``ModelInput``'s batch input kinds (model_config.proto, ``BatchInput.Kind``)
BATCH_INPUT_KINDS = ("BATCH_ELEMENT_COUNT", "BATCH_ACCUMULATED_ELEMENT_COUNT",
                     "BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO", "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE",
                     "BATCH_ITEM_SHAPE", "BATCH_ITEM_SHAPE_FLATTEN")
#: the most element counts one point's requests cycle through
VARIANTS = 8


def ragged_inputs(config) -> dict[str, int]:
    """The inputs declaring ``allow_ragged_batch`` that have a variable dim -> that dim's place in the configured
    dims (the first -1; the batch dimension excluded)."""
    found = {}
    for tensor in config.get("input", []):
        dims = [int(d) for d in (tensor.get("reshape") or {}).get("shape", tensor.get("dims", []))]
        if tensor.get("allow_ragged_batch") and -1 in dims:
            found[tensor["name"]] = dims.index(-1)
    return found


def declared_ragged(config) -> list[str]:
    """Every input declaring ``allow_ragged_batch``, variable dim or not."""
    return [t["name"] for t in config.get("input", []) if t.get("allow_ragged_batch")]


def batch_inputs(config) -> list[tuple[str, str, tuple[str, ...]]]:
    """The configuration's ``batch_input`` entries as (target, kind, source inputs), one per target name."""
    found = []
    for entry in config.get("batch_input", []):
        targets = entry.get("target_name", [])
        targets = [targets] if isinstance(targets, str) else targets
        sources = entry.get("source_input", [])
        sources = (sources,) if isinstance(sources, str) else tuple(sources)
        found += [(target, entry.get("kind", BATCH_INPUT_KINDS[0]), sources) for target in targets]
    return found


class Ragged(Kind):
    @staticmethod
    def applies(description) -> bool:
        return (description.batching and description.sequence_batching is None
                and bool(declared_ragged(description.config)))

    @property
    def varied(self) -> dict[str, int]:
        return ragged_inputs(self.description.config)

    def _batch_inputs_text(self) -> str:
        found = batch_inputs(self.description.config)
        return ", ".join(f"{t} ({k} of {', '.join(s) or '-'})" for t, k, s in found)

    def point(self, point):
        varied, filled = self.varied, self._batch_inputs_text()
        if varied:
            note = (f"ragged: each request cuts {', '.join(varied)} to one of up to {VARIANTS} element counts (a "
                    f"seeded share of the request's own, 1/{VARIANTS} to all), so the dynamic batcher meets requests "
                    f"of differing shapes")
        else:
            note = (f"ragged: allow_ragged_batch on {', '.join(declared_ragged(self.description.config))}, but no "
                    f"variable dim: every request carries the same element count (no ragged batch is made)")
        if filled:
            note += f"; batch_input {filled} is the server's to fill, never sent"
        if point.shared_memory and varied:
            note += "; inputs and outputs travel over the network, not shared memory (its regions fit one shape)"
        return replace(point, shared_memory=point.shared_memory and not varied), note

    def refuse(self, point, probes) -> str:
        bad = [(t, k) for t, k, _ in batch_inputs(self.description.config) if k not in BATCH_INPUT_KINDS]
        if bad:
            return (f"batch_input {bad[0][0]} has kind {bad[0][1]!r}: expected one of {', '.join(BATCH_INPUT_KINDS)}")
        if point.shared_memory and self.varied:
            return ("is ragged: its requests differ in element count, and a shared-memory region fits one shape "
                    "(send it over the network)")
        return ""

    def pattern(self, request, grpc: bool, point):
        varied = self.varied
        if not varied:
            return None
        targets = [t for t, _, _ in batch_inputs(self.description.config)]
        return Varied(variants(request, grpc, varied, targets), point.seed)

    def arguments(self) -> list[str]:
        """None: perf_analyzer has no option that varies a request's shape; its ``--input-data`` steps (one shape
        per step) are written from the engine's tensors by :mod:`tritonsuite.load.perfanalyzer`, so a row it
        measures sends one element count."""
        return []

    def summarise(self, measurement, windows, generator) -> None:
        measurement.meta["kind"] = [*measurement.meta.get("kind", []), "ragged"]
        pattern = generator.sequences
        found = {"inputs": declared_ragged(self.description.config),
                 "batch_inputs": [{"target": t, "kind": k, "source_input": list(s)}
                                  for t, k, s in batch_inputs(self.description.config)]}
        if isinstance(pattern, Varied):  # (worker processes: each its own, not merged into the row)
            found.update(pattern.summary(0))
        measurement.meta["ragged"] = found


# ------------------------------------------------------------------------------------------ the request pattern
@dataclass
class Variant:
    request: object  # PreparedRequest
    lengths: tuple[tuple[str, int], ...]  # each varied input's length along its variable dim


@dataclass
class Varied:
    """The load requests of a ragged deployment: each send takes a seeded choice of its variants (the generator's
    request-pattern interface: ``free_slot``, ``request``, ``done``, ``closing``, ``summary``)."""

    variants: list[Variant]
    seed: int = 0
    sent: list[int] = field(default_factory=list)

    def __post_init__(self):
        self._rng = np.random.default_rng(self.seed)
        self.sent = [0] * len(self.variants)

    def free_slot(self) -> int:
        return 0

    def request(self, slot: int):
        index = int(self._rng.integers(len(self.variants)))
        self.sent[index] += 1
        return self.variants[index].request

    def done(self, slot: int) -> None:
        pass

    def closing(self, slot: int | None = None) -> list:
        return []

    def summary(self, closing: int) -> dict:
        """Each variant's lengths along its inputs' variable dims, and the requests sent of each (warm-up
        included); ``closing`` (a sequence pattern's requests that ended the point) is always 0 here."""
        return {"lengths": [dict(v.lengths) for v in self.variants], "requests_sent_by_variant": list(self.sent)}


def _numpy(datatype: str, blob: bytes, shape: list[int]) -> np.ndarray:
    from tritonclient.utils import deserialize_bytes_tensor, triton_to_np_dtype

    if datatype == "BYTES":
        return deserialize_bytes_tensor(blob).reshape(shape)
    return np.frombuffer(blob, dtype=triton_to_np_dtype(datatype)).reshape(shape)


def _blob(datatype: str, array: np.ndarray) -> bytes:
    from tritonclient.utils import serialize_byte_tensor

    if datatype == "BYTES":
        return serialize_byte_tensor(array).tobytes()
    return np.ascontiguousarray(array).tobytes()


def _cut(datatype: str, blob: bytes, shape: list[int], axis: int, keep: int) -> tuple[bytes, list[int]]:
    array = _numpy(datatype, blob, shape)
    index = (slice(None),) * axis + (slice(0, keep),)
    cut = array[index]
    return _blob(datatype, cut), list(cut.shape)


def _lengths(length: int) -> list[int]:
    """Up to :data:`VARIANTS` distinct element counts from a share of ``length`` to all of it."""
    n = max(1, min(VARIANTS, length))
    return sorted({max(1, round(length * (j + 1) / n)) for j in range(n)})


def _refuse_targets(names: list[str], targets: list[str], sent: list[str]) -> None:
    carried = [n for n in names if n in targets]
    if carried:
        raise ValueError(f"ragged: the request carries {carried[0]}, a batch_input the server fills; send only the "
                         f"model's inputs ({', '.join(n for n in sent if n not in targets)})")


def variants(request, grpc: bool, varied: dict[str, int], targets: list[str]) -> list[Variant]:
    """``request`` (one prepared load request) cut into requests of differing element counts: each input in
    ``varied`` (name -> its variable dim, batch excluded) along that dim, to each of :func:`_lengths` of its own
    length (the j-th variant of every varied input together). A request carrying a ``targets`` input (a
    batch_input) raises ValueError naming it."""
    return (_grpc_variants if grpc else _http_variants)(request, varied, targets)


def _http_variants(request, varied, targets) -> list[Variant]:
    from tritonsuite.load.http import PreparedRequest

    head, _, body = request.data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    json_size = next((int(v) for k, _, v in (line.partition(b":") for line in lines)
                      if k.strip().lower() == b"inference-header-content-length"), None)
    header = json.loads(body[:json_size] if json_size is not None else body)
    inputs = header.get("inputs", [])
    names = [i["name"] for i in inputs]
    _refuse_targets(names, targets, names)
    if json_size is None or any("binary_data_size" not in i.get("parameters", {}) for i in inputs):
        raise ValueError("ragged: the request's tensors are not in the binary tensor extension; only those are cut")
    blobs, offset = [], json_size
    for i in inputs:
        size = int(i["parameters"]["binary_data_size"])
        blobs.append(body[offset:offset + size])
        offset += size
    rest = body[offset:]  # nothing after the inputs' blobs in a prepared request; kept as it is
    kept = [line for line in lines if line.split(b":")[0].strip().lower() not in
            (b"inference-header-content-length", b"content-length")]
    found = []
    for counts in _plan(inputs, varied, lambda i: i["shape"]):
        new_inputs, new_blobs = [], []
        for i, blob in zip(inputs, blobs):
            if i["name"] in counts:
                blob, shape = _cut(i["datatype"], blob, i["shape"], 1 + varied[i["name"]], counts[i["name"]])
                i = {**i, "shape": shape, "parameters": {**i["parameters"], "binary_data_size": len(blob)}}
            new_inputs.append(i)
            new_blobs.append(blob)
        text = json.dumps({**header, "inputs": new_inputs}, separators=(",", ":")).encode()
        binary = b"".join(new_blobs) + rest
        new_head = b"\r\n".join(kept + [b"Inference-Header-Content-Length: %d" % len(text),
                                        b"Content-Length: %d" % (len(text) + len(binary))])
        found.append(Variant(PreparedRequest(new_head + b"\r\n\r\n" + text + binary, request.decode_outputs,
                                             request.batched), tuple(sorted(counts.items()))))
    return found


def _grpc_variants(request, varied, targets) -> list[Variant]:
    from tritonclient.grpc import service_pb2

    from tritonsuite.load.http import PreparedRequest

    message = service_pb2.ModelInferRequest()
    message.ParseFromString(request.data)
    names = [i.name for i in message.inputs]
    _refuse_targets(names, targets, names)
    if len(message.raw_input_contents) != len(message.inputs):
        raise ValueError("ragged: the request's tensors are not in raw_input_contents; only those are cut")
    found = []
    for counts in _plan(message.inputs, varied, lambda i: list(i.shape)):
        copy = service_pb2.ModelInferRequest()
        copy.CopyFrom(message)
        for k, i in enumerate(copy.inputs):
            if i.name in counts:
                blob, shape = _cut(i.datatype, copy.raw_input_contents[k], list(i.shape), 1 + varied[i.name],
                                   counts[i.name])
                copy.raw_input_contents[k] = blob
                del i.shape[:]
                i.shape.extend(shape)
        found.append(Variant(PreparedRequest(copy.SerializeToString(), request.decode_outputs, request.batched),
                             tuple(sorted(counts.items()))))
    return found


def _plan(inputs, varied, shape_of) -> list[dict[str, int]]:
    """Each variant's element count per varied input (its j-th length), distinct variants only."""
    lengths = {}
    for i in inputs:
        name = i["name"] if isinstance(i, dict) else i.name
        if name in varied:
            shape = shape_of(i)
            lengths[name] = _lengths(int(shape[1 + varied[name]]))
    if not lengths:
        return [{}]
    n = max(len(v) for v in lengths.values())
    plan = []
    for j in range(n):
        counts = {name: found[min(len(found) - 1, j * len(found) // n)] for name, found in lengths.items()}
        if counts not in plan:
            plan.append(counts)
    return plan
