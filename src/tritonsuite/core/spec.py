"""Typed description of a model the suite can export, deploy, check and measure.

A model is a :class:`ModelSpec`: how to build the eager torch module, its serving signature (Triton tensor names,
dtypes, per-sample shapes), which export formats and precisions it supports, example inputs for performance runs,
and its accuracy task (data plus the metrics that compare a deployment with its eager reference).
"""
from __future__ import annotations

import dataclasses
import math
import hashlib
import inspect
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from tritonsuite.core.reasons import reason

FORMATS = ("ts-trace", "ts-script", "onnx")
PRECISIONS = ("fp32", "fp16", "mixed")
#: The precision whose rules judge another against fp32: ``mixed`` (fp16 with fp32 islands) is held to fp16's rules
#: (tolerances, task-metric thresholds), not to rules of its own (docs/precision.md)
#: names this module writes failure reasons to, beside ``problems`` and ``reason`` (tritonsuite.core.reasons)
REASON_NAMES = ("text",)
#: functions that return failure reasons (tritonsuite.core.reasons)
REASON_FUNCTIONS = ("describe",)
RULES_OF = {"mixed": "fp16"}
#: Module types (class names, subclasses included) a ``mixed`` deployment keeps in fp32: normalisations and softmax,
#: whose reductions lose range or precision in half. A spec extends it with its own types (``fp32_modules``)
FP32_MODULES = ("LayerNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d",
                "InstanceNorm3d", "GroupNorm", "Softmax", "LogSoftmax")


#: every failure reason this module gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("{} = {} (threshold {} {})",
           "unit/test_stats.py::test_a_failed_metric_says_its_value_threshold_direction_and_worst_example",
           "unit/test_fastpitch.py::"
           "test_reduced_precision_rule_allows_a_duration_one_frame_off_and_fails_many_changed"),
    reason("{}; worst example: {}",
           "unit/test_stats.py::test_a_failed_metric_says_its_value_threshold_direction_and_worst_example",
           "test_precision.py::test_wrong_fp16_deployments_fail_in_one_line_against_fp32"),
)


def rule_precision(precision: str) -> str:
    """The precision whose rules judge ``precision`` against fp32 (``mixed`` -> ``fp16``; the others their own)."""
    return RULES_OF.get(precision, precision)

# numpy dtype name -> Triton data type (the protocol's name; the model configuration's enum is TYPE_<name>, except
# BYTES, which the configuration calls TYPE_STRING). "bytes" is a BYTES tensor (numpy object arrays of bytes);
# "bfloat16" is BF16, which numpy has no type for (tritonclient sends float32 arrays as BF16)
TRITON_DTYPES = {
    "bool": "BOOL", "uint8": "UINT8", "uint16": "UINT16", "uint32": "UINT32", "uint64": "UINT64", "int8": "INT8",
    "int16": "INT16", "int32": "INT32", "int64": "INT64", "float16": "FP16", "float32": "FP32", "float64": "FP64",
    "bfloat16": "BF16", "bytes": "BYTES",
}


def numpy_dtype(name: str) -> np.dtype:
    """The numpy type of a :class:`TensorSpec` dtype name (see :attr:`TensorSpec.numpy_dtype`)."""
    if name == "bytes":
        return np.dtype(object)
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of the serving signature; ``shape`` excludes the batch dimension (-1 = dynamic)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    # upper bound of the shape for sizing buffers up front (system shared memory): -1 dims replaced by the largest
    # size the model produces for the example inputs; None when the shape is fixed
    max_shape: tuple[int, ...] | None = None
    # for an output padded along a dynamic axis within a batch: (name of the output holding each sample's valid
    # length, axis of this tensor's per-sample shape it counts). Frames past a sample's length are padding: the
    # runner trims each request to its own longest sample, and comparisons skip the padding
    valid_length: tuple[str, int] | None = None

    def __post_init__(self):
        if self.max_shape is not None and (len(self.max_shape) != len(self.shape) or any(
                d >= 0 and m != d or m < 0 for d, m in zip(self.shape, self.max_shape))):
            raise ValueError(f"{self.name}: max_shape {self.max_shape} must match shape {self.shape} with every -1 "
                             f"dim bounded")
        if self.valid_length is not None and not 0 <= self.valid_length[1] < len(self.shape):
            raise ValueError(f"{self.name}: valid_length axis {self.valid_length[1]} is not an axis of {self.shape}")

    @property
    def triton_dtype(self) -> str:
        return TRITON_DTYPES[self.dtype]

    @property
    def numpy_dtype(self) -> np.dtype:
        """The numpy type of the tensor's arrays: ``object`` for BYTES (elements are ``bytes``), ml_dtypes'
        ``bfloat16`` for BF16 (as tritonclient takes and returns them), else the dtype of that name."""
        return numpy_dtype(self.dtype)

    def max_elements(self) -> int:
        """Elements per sample at most: the shape's product, with ``max_shape`` bounding the dynamic dims."""
        shape = self.max_shape if self.max_shape is not None else self.shape
        if any(d < 0 for d in shape):
            raise ValueError(f"{self.name} has a dynamic shape {self.shape} and no max_shape to bound it")
        return int(np.prod(shape, dtype=np.int64))


@dataclass(frozen=True)
class Metric:
    """A task metric computed on a deployment's outputs, with the threshold it must meet."""

    name: str
    value: float
    threshold: float
    higher_is_better: bool = True
    worst: str = ""  # the worst example, named, for the failure message

    @property
    def passed(self) -> bool:
        if not np.isfinite(self.value):
            return False
        return self.value >= self.threshold if self.higher_is_better else self.value <= self.threshold

    def describe(self) -> str:
        op = ">=" if self.higher_is_better else "<="
        text = f"{self.name} = {self.value:.4f} (threshold {op} {self.threshold:.4f})"
        return f"{text}; worst example: {self.worst}" if self.worst else text


def chance_differences(samples: int, share: float, confidence: float = 0.95) -> int:
    """How many of ``samples`` answers may differ from the reference's, by chance alone, in a deployment that agrees
    with it at ``share``: the ``confidence`` quantile of a binomial count (each answer differing with probability
    1 - share). A share rule judged on few samples fails only beyond it, so no single answer decides a verdict the
    sample count cannot show: 48 questions at 0.99 allow 2; 10,570 (SQuAD's dev set) allow 123."""
    p = 1.0 - share
    if samples <= 0 or p <= 0.0:
        return 0
    if p >= 1.0:
        return samples
    log_p, log_q, cdf = math.log(p), math.log1p(-p), 0.0
    for k in range(samples + 1):
        cdf += math.exp(math.lgamma(samples + 1) - math.lgamma(k + 1) - math.lgamma(samples - k + 1)
                        + k * log_p + (samples - k) * log_q)
        if cdf >= confidence:
            return k
    return samples


@dataclass
class AccuracyData:
    """Inputs for an accuracy run, and the task metrics that compare served outputs with reference outputs.

    ``score(served, reference, precision)`` gets dicts output-name -> array over all samples and returns metrics.
    """

    inputs: dict[str, np.ndarray]
    score: Callable[[Mapping[str, np.ndarray], Mapping[str, np.ndarray], str], list[Metric]]
    description: str = ""
    data_sha256: str = ""  # sha256 of the data file the inputs and labels come from ("" for generated data)


@dataclass(frozen=True)
class RepositoryEntry:
    """Where a team's deployment comes from (``--model-repository``, :mod:`tritonsuite.deploy.userrepo`): its
    directory, served as given (never exported), and what the suite read of it."""

    directory: Path  # the team's <repository>/<name>
    version: str  # the version this entry drives
    versions: tuple[str, ...]  # every version directory its policy serves, ascending
    model_file_digest: str | None  # sha256 of the version's model file (None: an ensemble, no file of its own)
    reference: str | None = None  # --reference NAME=FILE: the file its answers are judged against
    auto_completed: bool = False  # shipped without config.pbtxt: the server completes it
    max_batch_size: int = 0  # as the suite read it (an auto-completed one's, checked against the server's)
    composing: tuple[str, ...] = ()  # every model it composes (an ensemble's steps, nested ones included)


@dataclass(frozen=True)
class ModelSpec:
    """Everything the suite needs to know about one model at one size.

    ``build(checkpoint)`` returns an eval-mode ``torch.nn.Module`` whose ``forward`` takes the inputs in signature
    order (as tensors of the signature dtypes, batch first) and returns a tuple of outputs in signature order.
    """

    name: str
    size: str
    build: Callable[[Path | None], Any]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    example_inputs: Callable[[int, int], dict[str, np.ndarray]]  # (batch_size, seed) -> inputs
    formats: tuple[str, ...] = FORMATS
    precisions: tuple[str, ...] = PRECISIONS
    # per precision, per output name: (atol, rtol) for artifact-vs-eager and Triton-vs-eager comparisons, or
    # (atol, rtol, share): at most that fraction of each sample's elements may fall outside atol/rtol. The share is
    # for discrete outputs (argmax label maps), where a float difference of e between runtimes flips exactly the
    # elements whose top-two margin is below e; continuous outputs leave it out (0: every element must match).
    tolerances: Mapping[str, Mapping[str, tuple[float, ...]]] = field(default_factory=dict)
    # (user dataset or None, user checkpoint or None) -> data; None when the model has no accuracy task
    accuracy_data: Callable[[Path | None, Path | None], AccuracyData] | None = None
    config: Mapping[str, Any] = field(default_factory=dict)  # architecture hyper-parameters, part of the cache key
    weights_files: Callable[[], Sequence[Path]] = lambda: ()  # files whose content determines the weights
    # (user dataset or None, checkpoint file to write) -> training statistics. Models with no published weights
    # that can be fetched here train briefly on real or generated data; the suite caches the checkpoint on disk
    # (tritonsuite.models.training) and passes it to ``build`` and ``accuracy_data`` when the user gave none.
    train: Callable[[Path | None, Path], Mapping[str, Any]] | None = None
    training: Mapping[str, Any] = field(default_factory=dict)  # training hyper-parameters, part of its cache key
    parameters: Mapping[str, Any] = field(default_factory=dict)  # extra rows for the report's parameter table
    # extra input batches export verification checks besides example_inputs at its batch sizes: models with a
    # dynamic input dim give other lengths (and padding) here, so an artifact traced at one length is proven to
    # generalise. () -> list of input dicts
    verification_inputs: Callable[[], Sequence[dict[str, np.ndarray]]] | None = None
    description: str = ""
    # class names of the modules a ``mixed`` deployment keeps in fp32 (subclasses included); part of the mixed
    # artifacts' cache key only
    fp32_modules: tuple[str, ...] = FP32_MODULES
    title: str = ""  # display name in reports ("BERT", "Wide & Deep"); the model name when empty
    # the streaming example (tritonsuite.deploy.streaming): which output streams in chunks, along which axis (batch
    # included), of what size, up to which valid-length output; {} when the model has none
    stream: Mapping[str, Any] = field(default_factory=dict)
    # a team's deployment (--model-repository): where it is read from and served as given; None for the suite's own
    served_from: "RepositoryEntry | None" = None

    @property
    def key(self) -> str:
        return f"{self.name}:{self.size}"

    @property
    def supported_precisions(self) -> tuple[str, ...]:
        """``precisions``, and ``mixed`` wherever fp16 is declared (mixed is fp16 with fp32 islands, judged by
        fp16's rules; declaring it is not needed, so adding it edits no model's source, which keys its cache)."""
        return tuple(self.precisions) + tuple(p for p, rules in RULES_OF.items()
                                              if rules in self.precisions and p not in self.precisions)

    def _tolerances(self, precision: str) -> Mapping[str, tuple[float, ...]]:
        return (self.tolerances.get(precision) or self.tolerances.get(rule_precision(precision))
                or self.tolerances.get("fp32") or {})

    def tolerance(self, precision: str, output: str) -> tuple[float, float]:
        return tuple(self._tolerances(precision).get(output, (1e-4, 1e-4))[:2])

    def mismatch_share(self, precision: str, output: str) -> float:
        """The fraction of a sample's elements of ``output`` allowed outside tolerance (0 unless declared)."""
        per_output = self._tolerances(precision)
        found = per_output.get(output, ())
        return float(found[2]) if len(found) > 2 else 0.0

    def fingerprint(self) -> dict[str, Any]:
        """What identifies the built module (for cache keys): name, size, signature, config, and the content of
        the source file that defines ``build`` (so editing a model's code invalidates its cached artifacts)."""
        return {
            "name": self.name,
            "size": self.size,
            "inputs": [dataclasses.astuple(t) for t in self.inputs],
            "outputs": [dataclasses.astuple(t) for t in self.outputs],
            "config": dict(self.config),
            "code": _source_digest(self.build),
        }


_FILE_HASHES: dict[tuple[str, int, int], str] = {}


def _source_digest(func: Callable) -> str | None:
    """Digest of the file that defines ``func`` (None where there is no source file, e.g. a REPL function)."""
    try:
        source = inspect.getsourcefile(inspect.unwrap(func))
    except TypeError:
        return None
    return file_digest(Path(source)) if source and Path(source).is_file() else None


def file_digest(path: Path) -> str:
    """sha256 of a file's content, remembered per (path, size, mtime) within the process."""
    st = path.stat()
    memo = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if memo not in _FILE_HASHES:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        _FILE_HASHES[memo] = h.hexdigest()
    return _FILE_HASHES[memo]


def path_digest(path: Path | None) -> str | None:
    """A digest of a file's or a directory tree's content (None for None): for checkpoint and dataset cache keys."""
    if path is None:
        return None
    path = Path(path)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return stable_hash([(str(p.relative_to(path)) if p != path else p.name, file_digest(p)) for p in files])


def stable_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()
