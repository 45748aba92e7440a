"""The seeds' published result tables, and the join of a measured row to its published row.

The tables ship with the package as ``tritonsuite/core/published/<gpu>/<model>.csv`` (``gpu``: a100, a30, a40, t4,
v100; ``model``: the suite's model names), transcribed from the seeds' result tables by
``fixtures/published/transcribe.py``. One CSV row is one published row: the labels that identify the published
configuration, then the seeds' result columns (:data:`tritonsuite.core.rows.RESULT_COLUMNS`, times in ms) with a column
the seed did not publish left empty.

Labels: the join keys in the suite's vocabulary (``gpu``, ``model``, ``size``: the suite's model size that has the
published configuration, ``scenario``, ``format``: ts-trace, ts-script, onnx, or trt and savedmodel, which this
suite cannot build yet, ``precision``, ``accelerator``: none, trt (ONNX Runtime's TensorRT execution provider) or
amp (TensorFlow's automatic mixed precision)), then the published values as the seeds wrote them (``GPU``,
``Backend``, ``Backend accelerator``, ``Model format``, ``Max batch size``, ``Number of model instances``,
``Configuration``: every other published parameter, ``Source``: seed file and section heading, ``Note``: a
coordinate the seed left implicit).

A measured row joins a published row when its profile names published tables (a GPU profile's ``published:`` key,
recorded in the row's "Published tables" parameter) and model, size, scenario, format, precision, backend
accelerator, max batch size, number of model instances, batch and concurrency are all equal. CPU profiles never
join: the published figures are GPU figures. A run whose GPU is not the published one still joins (the a100
profile on an H100, the h100 profile against the A100 tables) and :attr:`Match.same_gpu` says so.

A leaf module apart from :mod:`tritonsuite.core.rows`: usable without pytest, the server or torch.
"""
from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

from tritonsuite.core.rows import RESULT_COLUMNS, Row

PACKAGE_DIR = Path(__file__).resolve().parent
#: The join keys, in the suite's vocabulary.
KEY_COLUMNS = ("gpu", "model", "size", "scenario", "format", "precision", "accelerator")
#: The published configuration as the seeds wrote it.
PUBLISHED_COLUMNS = ("GPU", "Backend", "Backend accelerator", "Model format", "Max batch size",
                     "Number of model instances", "Configuration", "Source", "Note")
LABEL_COLUMNS = KEY_COLUMNS + PUBLISHED_COLUMNS
COLUMNS = LABEL_COLUMNS + RESULT_COLUMNS
SCENARIOS = ("offline", "online")
ACCELERATORS = ("none", "trt", "amp")
#: The GPU name token of each published GPU, as the seeds and NVML write it.
GPU_TOKENS = {"a100": "A100", "a30": "A30", "a40": "A40", "t4": "T4", "v100": "V100", "h100": "H100"}
#: Row parameters the join reads (written by tritonsuite.run.suite.Suite.parameters).
PUBLISHED_PARAMETER = "Published tables"


class PublishedError(ValueError):
    """A published table that cannot be used (unknown GPU or model, malformed CSV); one line naming the choices."""


@dataclass(frozen=True)
class PublishedRow:
    """One row of a seed's published results table."""

    labels: Mapping[str, str]
    result: Mapping[str, float | int | None]
    where: str  # file:line

    gpu = property(lambda self: self.labels["gpu"])
    model = property(lambda self: self.labels["model"])
    size = property(lambda self: self.labels["size"])
    scenario = property(lambda self: self.labels["scenario"])
    format = property(lambda self: self.labels["format"])
    precision = property(lambda self: self.labels["precision"])
    accelerator = property(lambda self: self.labels["accelerator"])

    @property
    def batch(self) -> int:
        return int(self.result["Batch"])

    @property
    def concurrency(self) -> int:
        return int(self.result["Concurrency"])

    @property
    def key(self) -> tuple:
        """What a measured row must equal to join this one."""
        return (*(self.labels[c] for c in KEY_COLUMNS), _int(self.labels["Max batch size"]),
                _int(self.labels["Number of model instances"]), self.batch, self.concurrency)


def published_dir(directory: str | Path | None = None) -> Path:
    return Path(directory) if directory else PACKAGE_DIR


def available_gpus(directory: str | Path | None = None) -> list[str]:
    """The GPUs with published tables (``<dir>/<gpu>/*.csv``)."""
    root = published_dir(directory)
    return sorted(p.name for p in root.iterdir() if p.is_dir() and any(p.glob("*.csv")))


def available_models(gpu: str, directory: str | Path | None = None) -> list[str]:
    return sorted(p.stem for p in (published_dir(directory) / gpu).glob("*.csv"))


def _int(text: Any) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _number(text: str, where: str, column: str) -> float | int | None:
    text = text.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise PublishedError(f"{where}: {column} {text!r}: expected a number or empty") from None
    if not math.isfinite(value) or value < 0:
        raise PublishedError(f"{where}: {column} {text!r}: expected a finite number >= 0")
    return int(value) if value.is_integer() and "." not in text else value


@lru_cache(maxsize=None)
def _read(path: Path) -> tuple[PublishedRow, ...]:
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or tuple(header) != COLUMNS:
            missing = [c for c in COLUMNS if c not in (header or [])]
            extra = [c for c in header or [] if c not in COLUMNS]
            raise PublishedError(f"{path}:1: header is not the published columns (missing: {', '.join(missing) or '-'};"
                                 f" unknown: {', '.join(extra) or '-'}; order: {', '.join(COLUMNS)})")
        rows = []
        for lineno, cells in enumerate(reader, start=2):
            where = f"{path}:{lineno}"
            if len(cells) != len(COLUMNS):
                raise PublishedError(f"{where}: {len(cells)} cells; expected {len(COLUMNS)}")
            labels = dict(zip(LABEL_COLUMNS, cells[:len(LABEL_COLUMNS)]))
            for column, valid in (("scenario", SCENARIOS), ("accelerator", ACCELERATORS)):
                if labels[column] not in valid:
                    raise PublishedError(f"{where}: {column} {labels[column]!r}; valid choices: {', '.join(valid)}")
            result = {c: _number(v, where, c) for c, v in zip(RESULT_COLUMNS, cells[len(LABEL_COLUMNS):])}
            for column in ("Batch", "Concurrency", "Inferences/Second", "p99 latency"):
                if result[column] is None:
                    raise PublishedError(f"{where}: {column} is empty; every published row has it")
            rows.append(PublishedRow(labels=labels, result=result, where=where))
    return tuple(rows)


def load_table(gpu: str, model: str, directory: str | Path | None = None) -> list[PublishedRow]:
    """The published rows of ``model`` on ``gpu`` (every seed table for them, in the seed's order)."""
    gpus = available_gpus(directory)
    if gpu not in gpus:
        raise PublishedError(f"no published tables for GPU {gpu!r}; valid choices: {', '.join(gpus)}")
    path = published_dir(directory) / gpu / f"{model}.csv"
    if not path.is_file():
        raise PublishedError(f"no published table for {model!r} on {gpu}; valid choices: "
                             f"{', '.join(available_models(gpu, directory))}")
    return list(_read(path.resolve()))


def load_published(directory: str | Path | None = None) -> list[PublishedRow]:
    """Every published row of every GPU and model."""
    return [row for gpu in available_gpus(directory) for model in available_models(gpu, directory)
            for row in load_table(gpu, model, directory)]


# ------------------------------------------------------------------------------------------------------ the join
def accelerator_name(value: Any) -> str:
    """A row's or a seed's "Backend accelerator" in the suite's vocabulary: none, trt or amp."""
    low = str(value or "-").strip().lower()
    if low in ("", "-", "none", "cuda"):
        return "none"
    if "tensorrt" in low or low == "trt":
        return "trt"
    if low in ("amp", "automatic fp16"):
        return "amp"
    return low


def _size(row: Row) -> str:
    """The model size from the "Model" parameter ("bert:large (BERT-large ...)")."""
    model = str(row.parameters.get("Model", ""))
    key = model.split(" ", 1)[0]
    return key.split(":", 1)[1] if ":" in key else ""


def row_key(row: Row) -> tuple | None:
    """The key a measured row joins by, or None when its profile names no published tables or it has no point."""
    gpu = row.parameters.get(PUBLISHED_PARAMETER)
    if not gpu or row.batch is None or row.concurrency is None or row.request_rate is not None:
        return None
    return (str(gpu), row.model, _size(row), row.scenario, row.format, row.precision,
            accelerator_name(row.parameters.get("Backend accelerator")),
            _int(row.parameters.get("Max batch size")), _int(row.parameters.get("Number of model instances")),
            int(row.batch), int(row.concurrency))


@dataclass(frozen=True)
class Match:
    """A measured row beside its published row."""

    measured: Row
    published: PublishedRow

    @property
    def published_gpu(self) -> str:
        return self.published.labels["GPU"]

    @property
    def measured_gpu(self) -> str:
        return str(self.measured.parameters.get("GPU", "unknown"))

    @property
    def same_gpu(self) -> bool | None:
        """True when the measured GPU is the published one, False when it is another, None when this host could
        not see the GPU (a remote server: the row names the profile's GPU, not a measured one)."""
        measured = self.measured_gpu
        if "as the profile names it" in measured:
            return None
        token = GPU_TOKENS.get(self.published.gpu, self.published.gpu.upper())
        return re.search(rf"\b{re.escape(token)}\b", measured) is not None

    def _measured(self, column: str) -> float | None:
        value = self.measured.result.get(column)
        return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None

    @property
    def throughput(self) -> float | None:
        return self._measured("Inferences/Second")

    @property
    def p99(self) -> float | None:
        return self._measured("p99 latency")

    @property
    def published_throughput(self) -> float:
        return float(self.published.result["Inferences/Second"])

    @property
    def published_p99(self) -> float:
        return float(self.published.result["p99 latency"])

    @property
    def throughput_ratio(self) -> float | None:
        """Measured / published throughput (above 1: faster than published)."""
        return self.throughput / self.published_throughput if self.throughput is not None else None

    @property
    def p99_ratio(self) -> float | None:
        """Measured / published p99 latency (above 1: slower than published)."""
        return self.p99 / self.published_p99 if self.p99 is not None and self.published_p99 else None


@lru_cache(maxsize=None)
def _index(directory: str | None) -> dict[tuple, PublishedRow]:
    index: dict[tuple, PublishedRow] = {}
    for row in load_published(directory):
        if row.key in index:
            raise PublishedError(f"{row.where}: the same published configuration and point as "
                                 f"{index[row.key].where}")
        index[row.key] = row
    return index


def join(row: Row, directory: str | Path | None = None) -> Match | None:
    """The published row a measured row matches, or None (no published tables named, or no such published row)."""
    key = row_key(row)
    if key is None:
        return None
    found = _index(str(directory) if directory else None).get(key)
    return Match(row, found) if found is not None else None


def join_all(rows: Iterable[Row], directory: str | Path | None = None) -> list[Match]:
    return [m for m in (join(r, directory) for r in rows) if m is not None]


def published_configurations(gpu: str, model: str, directory: str | Path | None = None) -> list[str]:
    """What is published for ``model`` on ``gpu``, one line per configuration (to say why a deployment did not
    join)."""
    try:
        rows = load_table(gpu, model, directory)
    except PublishedError:
        return []
    seen: list[str] = []
    for r in rows:
        text = (f"{r.scenario} {r.size} {r.format} {r.precision}"
                + (f" accelerator {r.accelerator}" if r.accelerator != "none" else "")
                + f", max batch size {r.labels['Max batch size']}, {r.labels['Number of model instances']} "
                  f"instance(s)")
        if text not in seen:
            seen.append(text)
    return seen

