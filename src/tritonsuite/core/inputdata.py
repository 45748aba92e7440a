"""Input data as perf_analyzer takes it (``--input-data random|zero|FILE.json|DIR``, ``--shape NAME:d1,d2``), read
into per-request steps, and written back in perf_analyzer's own JSON layout.

perf_analyzer's JSON (docs: perf_analyzer/docs/input_data.md)::

    {"data": [{"INPUT0": {"content": [...], "shape": [16]}, "INPUT1": [...]}, ...],
     "validation_data": [{"OUTPUT0": {"content": [...]}}, ...]}

Each entry of ``data`` is one step: the tensors of a batch-1 request, the batch dimension left out. A tensor is a
flat list (its shape the configured one, or ``--shape``), ``{"content": [...], "shape": [...]}`` or
``{"b64": "..."}`` (raw little-endian bytes). ``validation_data`` holds the expected outputs of the step with the same
index. A batch of ``b`` takes ``b`` consecutive steps (wrapping around); a directory holds one raw binary file per
input (and optionally per output, for validation), named after the tensor, for a batch-1 request.
"""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from tritonsuite.core.spec import TensorSpec

MODES = ("random", "zero")
STRING_LENGTH = 128  # perf_analyzer's --string-length default


def _strings(values) -> np.ndarray:
    """BYTES elements as tritonclient sends them: ``bytes`` (perf_analyzer's JSON holds strings)."""
    flat = np.asarray(values, dtype=object).reshape(-1)
    return np.array([v if isinstance(v, bytes) else str(v).encode() for v in flat], dtype=object).reshape(
        np.shape(values))


def _from_bytes(raw: bytes, t: TensorSpec) -> np.ndarray:
    """Raw little-endian bytes of a tensor (``b64``, a directory's file); BYTES in Triton's serialised form (each
    element a 4-byte length and its bytes)."""
    if t.dtype == "bytes":
        from tritonclient.utils import deserialize_bytes_tensor

        return deserialize_bytes_tensor(raw)
    return np.frombuffer(raw, dtype=t.numpy_dtype.newbyteorder("<"))


class InputDataError(ValueError):
    """Input data that does not fit the model; the message names the tensor, the value and what was expected."""


@dataclass(frozen=True)
class InputData:
    """Steps of per-request tensors (no batch dimension) and, where given, the expected outputs of each step."""

    source: str  # "random", "zero", or the file / directory it was read from
    steps: tuple[Mapping[str, np.ndarray], ...]
    validation: tuple[Mapping[str, np.ndarray], ...] = ()

    def batch(self, batch_size: int, start: int = 0) -> dict[str, np.ndarray]:
        """``batch_size`` consecutive steps from ``start`` (wrapping), stacked along a new batch dimension."""
        picked = [self.steps[(start + i) % len(self.steps)] for i in range(batch_size)]
        out = {}
        for name in picked[0]:
            shapes = {p[name].shape for p in picked}
            if len(shapes) > 1:
                raise InputDataError(f"input {name}: steps {start}..{start + batch_size - 1} have different shapes "
                                     f"{sorted(shapes)}; a batch needs one shape (use batch size 1 or equal shapes)")
            out[name] = np.stack([p[name] for p in picked])
        return out

    def all_steps(self) -> dict[str, np.ndarray]:
        """Every step stacked (the accuracy run's samples)."""
        return self.batch(len(self.steps))

    def expected(self) -> dict[str, np.ndarray]:
        """The validation outputs of every step, stacked (empty when the data has none)."""
        if not self.validation:
            return {}
        return {name: np.stack([v[name] for v in self.validation]) for name in self.validation[0]}

    def describe(self) -> str:
        extra = f", validation_data for {len(self.validation)}" if self.validation else ""
        return f"{self.source} ({len(self.steps)} step{'s' if len(self.steps) != 1 else ''}{extra})"


def parse_shapes(values: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """``--shape NAME:d1,d2`` values (repeatable) into {name: dims}, as perf_analyzer's ``--shape``."""
    shapes = {}
    for value in values:
        name, sep, dims = value.rpartition(":")
        try:
            parsed = tuple(int(d) for d in dims.split(","))
        except ValueError:
            parsed = ()
        if not sep or not name or not parsed or any(d < 1 for d in parsed):
            raise InputDataError(f"--shape {value!r}: expected NAME:d1,d2,... with positive dims (batch dim left out)")
        shapes[name] = parsed
    return shapes


def _shape_of(t: TensorSpec, shapes: Mapping[str, tuple[int, ...]]) -> tuple[int, ...]:
    if t.name in shapes:
        given = shapes[t.name]
        if len(given) != len(t.shape) or any(d >= 0 and g != d for d, g in zip(t.shape, given)):
            raise InputDataError(f"--shape {t.name}:{','.join(map(str, given))} does not fit its configured dims "
                                 f"{list(t.shape)} (-1 = dynamic)")
        return given
    if any(d < 0 for d in t.shape):
        raise InputDataError(f"input {t.name} has dynamic dims {list(t.shape)}: give --shape {t.name}:"
                             f"{','.join('N' if d < 0 else str(d) for d in t.shape)}")
    return tuple(t.shape)


def generated(mode: str, inputs: Sequence[TensorSpec], shapes: Mapping[str, tuple[int, ...]] | None = None,
              seed: int = 0, steps: int = 1) -> InputData:
    """perf_analyzer's ``random`` (one tensor per input, reused) or ``zero`` data. ``steps`` above 1 draws that many
    steps one after another from ``seed``, so a batch of them has rows that differ (a conformance check's request:
    a row answered in another's place shows); the first step is the same whatever ``steps`` is."""
    if mode not in MODES:
        raise InputDataError(f"--input-data {mode!r}: valid choices: {', '.join(MODES)}, a JSON file or a directory")
    rng = np.random.default_rng(seed)
    dims = {t.name: _shape_of(t, shapes or {}) for t in inputs}
    found = []
    for _ in range(steps):
        step = {}
        for t in inputs:
            shape = dims[t.name]
            if t.dtype == "bytes":  # perf_analyzer: random strings of --string-length (128) characters, or ""
                letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
                count = int(np.prod(shape, dtype=np.int64))
                words = [b"" if mode == "zero" else rng.choice(letters, STRING_LENGTH).tobytes()
                         for _ in range(count)]
                step[t.name] = np.array(words, dtype=object).reshape(shape)
            elif mode == "zero":
                step[t.name] = np.zeros(shape, dtype=t.numpy_dtype)
            elif t.dtype == "bfloat16" or np.issubdtype(np.dtype(t.dtype), np.floating):  # numpy alone knows no bf16
                step[t.name] = rng.random(shape).astype(t.numpy_dtype)
            elif t.dtype == "bool":
                step[t.name] = rng.integers(0, 2, shape).astype(bool)
            else:  # perf_analyzer's random integers are small non-negative values; keep them valid as indices too
                step[t.name] = rng.integers(0, 2, shape).astype(t.dtype)
        found.append(step)
    return InputData(mode, tuple(found))


def _tensor(value, t: TensorSpec, shapes: Mapping[str, tuple[int, ...]], where: str,
            infer: bool = False) -> np.ndarray:
    """One tensor of a step; ``infer`` (expected outputs): a flat list fills the one dynamic dim of its shape."""
    shape = None
    if isinstance(value, dict):
        if "b64" in value:
            array = _from_bytes(base64.b64decode(value["b64"]), t)
        elif "content" in value:
            array = _strings(value["content"]) if t.dtype == "bytes" else np.asarray(value["content"],
                                                                                     dtype=t.numpy_dtype)
        else:
            raise InputDataError(f"{where}: {t.name} has neither 'content' nor 'b64' (keys: {', '.join(value)})")
        shape = value.get("shape")
    else:
        array = _strings(value) if t.dtype == "bytes" else np.asarray(value, dtype=t.numpy_dtype)
    if shape is None and infer and sum(d < 0 for d in t.shape) == 1 and t.name not in shapes:
        fixed = int(np.prod([d for d in t.shape if d >= 0], dtype=np.int64))
        shape = tuple(array.size // max(fixed, 1) if d < 0 else d for d in t.shape)
    if shape is None:
        try:
            shape = _shape_of(t, shapes)
        except InputDataError as exc:
            raise InputDataError(f"{where}: {exc}; or give its \"shape\" in the file") from None
    shape = tuple(int(d) for d in shape)
    if array.size != int(np.prod(shape, dtype=np.int64)):
        raise InputDataError(f"{where}: {t.name} has {array.size} values, shape {list(shape)} needs "
                             f"{int(np.prod(shape, dtype=np.int64))}")
    if len(shape) != len(t.shape) or any(d >= 0 and s != d for d, s in zip(t.shape, shape)):
        raise InputDataError(f"{where}: {t.name} shape {list(shape)} does not fit its configured dims {list(t.shape)}")
    return array.reshape(shape).astype(t.numpy_dtype, copy=False)


def read_json(path: str | Path, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec],
              shapes: Mapping[str, tuple[int, ...]] | None = None) -> InputData:
    """A perf_analyzer input-data JSON file for a model with these tensors."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputDataError(f"--input-data {path}: not a readable JSON file ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list) or not doc["data"]:
        raise InputDataError(f"--input-data {path}: expected {{\"data\": [{{\"INPUT\": ...}}, ...]}} with at least one "
                             f"step (perf_analyzer's layout)")
    shapes = shapes or {}
    steps = []
    for i, entry in enumerate(doc["data"]):
        missing = [t.name for t in inputs if t.name not in entry]
        unknown = [k for k in entry if k not in {t.name for t in inputs}]
        if missing or unknown:
            raise InputDataError(f"--input-data {path}: data[{i}] " + (f"lacks input {missing[0]}" if missing else
                                 f"names {unknown[0]}, not an input") + f"; inputs: {', '.join(t.name for t in inputs)}")
        steps.append({t.name: _tensor(entry[t.name], t, shapes, f"{path.name} data[{i}]") for t in inputs})
    validation = []
    by_name = {t.name: t for t in outputs}
    for i, entry in enumerate(doc.get("validation_data") or []):
        unknown = [k for k in entry if k not in by_name]
        if unknown:
            raise InputDataError(f"--input-data {path}: validation_data[{i}] names {unknown[0]}, not an output; "
                                 f"outputs: {', '.join(by_name)}")
        validation.append({k: _tensor(v, by_name[k], {}, f"{path.name} validation_data[{i}]", infer=True)
                           for k, v in entry.items()})
    if validation and len(validation) != len(steps):
        raise InputDataError(f"--input-data {path}: {len(validation)} validation_data entries for {len(steps)} data "
                             f"steps; perf_analyzer pairs them one to one")
    return InputData(str(path), tuple(steps), tuple(validation))


def read_directory(path: str | Path, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec],
                   shapes: Mapping[str, tuple[int, ...]] | None = None) -> InputData:
    """perf_analyzer's directory form: one raw binary file per input (and optionally per output), batch 1."""
    path = Path(path)
    step, expected = {}, {}
    for tensors, target, needed in ((inputs, step, True), (outputs, expected, False)):
        for t in tensors:
            file = path / t.name
            if not file.is_file():
                if needed:
                    raise InputDataError(f"--input-data {path}: no file {t.name} for input {t.name}")
                continue
            array = _from_bytes(file.read_bytes(), t)
            target[t.name] = _tensor({"content": array.tolist()}, t, shapes or {}, f"{path.name}/{t.name}",
                                     infer=not needed)
    return InputData(str(path), (step,), (expected,) if expected else ())


def load(value: str, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec],
         shapes: Mapping[str, tuple[int, ...]] | None = None) -> InputData:
    """``--input-data`` as perf_analyzer reads it: random, zero, a JSON file or a directory."""
    if value in MODES:
        return generated(value, inputs, shapes)
    path = Path(value)
    if path.is_dir():
        return read_directory(path, inputs, outputs, shapes)
    if path.is_file():
        return read_json(path, inputs, outputs, shapes)
    raise InputDataError(f"--input-data {value!r}: valid choices: {', '.join(MODES)}, a JSON file or a directory")


def _content(array: np.ndarray) -> dict:
    flat = np.asarray(array).reshape(-1)
    if flat.dtype == object:  # BYTES: perf_analyzer's JSON strings
        return {"content": [v.decode() if isinstance(v, bytes) else str(v) for v in flat], "shape": list(array.shape)}
    return {"content": flat.astype(np.float32).tolist() if flat.dtype.name == "bfloat16" else flat.tolist(),
            "shape": list(array.shape)}


def to_json(data: InputData) -> dict:
    """``data`` in perf_analyzer's JSON layout (what ``perf_analyzer --input-data FILE`` reads)."""
    doc: dict = {"data": [{k: _content(v) for k, v in step.items()} for step in data.steps]}
    if data.validation:
        doc["validation_data"] = [{k: _content(v) for k, v in step.items()} for step in data.validation]
    return doc
