"""One description of a deployment, whatever its kind: what the load generators, the judges and the reports read.

perf_analyzer's model parser turns every deployment (a plain model, an ensemble, a sequence model, a decoupled one)
into one description its load managers read; Model Analyzer keeps one config model for every kind. This is the
suite's: :func:`describe` reads a model configuration in its JSON form, the form Triton hands a backend and serves
at ``/v2/models/<m>/config`` (so a configuration the server auto-completed reads the same as a written one), and
returns a :class:`ModelDescription`: tensors (batch dimension excluded), max batch size, which scheduler
(``none``, ``dynamic``, ``sequence``, ``ensemble``: ``ModelConfig.scheduling_choice``), the dynamic batcher's and
the sequence batcher's settings, whether responses are decoupled, instance groups, version policy, response cache,
and an ensemble's steps with the composing models resolved recursively (nested ensembles included) through a
``lookup`` of configurations by name. A BLS model's configuration does not name the models it calls: they come
from the user (perf_analyzer's ``--bls-composing-models``) as ``composing``.

A leaf of the typed core (it imports only :mod:`tritonsuite.core.spec`): files are ``deploy``'s, servers ``server``'s.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

from tritonsuite.core.spec import TRITON_DTYPES, TensorSpec

#: ``ModelConfig.scheduling_choice`` as this module names it (no field set: ``none``, the default scheduler)
SCHEDULERS = ("none", "dynamic", "sequence", "ensemble")
#: Control inputs of the sequence batcher, by ``ModelSequenceBatching.Control.Kind``
CONTROL_KINDS = ("CONTROL_SEQUENCE_START", "CONTROL_SEQUENCE_READY", "CONTROL_SEQUENCE_END",
                 "CONTROL_SEQUENCE_CORRID")
#: Triton data type (the configuration's enum without ``TYPE_``) -> the dtype name of a
#: :class:`~tritonsuite.core.spec.TensorSpec` (the configuration calls BYTES ``TYPE_STRING``)
NUMPY_DTYPES = {**{v: k for k, v in TRITON_DTYPES.items()}, "STRING": "bytes"}


def model_and_version(ref: str) -> tuple[str, str]:
    """A model reference as rows and requests carry it, ``name`` or ``name:version`` (perf_analyzer's
    ``--bls-composing-models`` syntax), into (name, version; "" for the latest the policy serves)."""
    name, sep, version = str(ref).rpartition(":")
    return (name, version) if sep and version.isdigit() else (str(ref), "")


class DescriptionError(ValueError):
    """A configuration that cannot be described; the message names the model and the problem."""


DEFAULT_LENGTH = 20  # perf_analyzer's --sequence-length default
DEFAULT_VARIATION = 20.0  # and its --sequence-length-variation (percent)


class SequenceSettingsError(DescriptionError):
    """A sequence option that cannot be used; the message names the value and what is valid."""


@dataclass(frozen=True)
class SequenceSettings:
    """How a sequence model's sequences are sent (its description's ``sequences``): perf_analyzer's
    ``--sequence-length``, ``--sequence-length-variation`` (percent) and ``--sequence-id-range`` (``id_end`` 0: no
    end), and the seed their lengths are drawn from."""

    length: int = DEFAULT_LENGTH
    variation_percent: float = DEFAULT_VARIATION
    id_start: int = 1
    id_end: int = 0
    seed: int = 0

    def __post_init__(self):
        if self.length < 1:
            raise SequenceSettingsError(f"--sequence-length {self.length}: expected a whole number >= 1")
        if not 0.0 <= self.variation_percent <= 100.0:
            raise SequenceSettingsError(f"--sequence-length-variation {self.variation_percent:g}: expected a "
                                        f"percentage from 0 to 100")
        if self.id_start < 1 or (self.id_end and self.id_end <= self.id_start):
            raise SequenceSettingsError(f"--sequence-id-range {self.id_start}:{self.id_end}: expected START >= 1 and "
                                        f"END > START (or no END)")

    def describe(self) -> str:
        ids = f"{self.id_start}:{self.id_end}" if self.id_end else f"{self.id_start}:"
        return (f"sequence length {self.length} ± {self.variation_percent:g}%, ids {ids}, one live sequence per "
                f"slot")

    def to_json(self) -> dict:
        return {"sequence_length": self.length, "sequence_length_variation": self.variation_percent,
                "sequence_id_range": [self.id_start, self.id_end or None], "seed": self.seed}


def sequence_options(length: int, variation_percent: float, id_range: str) -> SequenceSettings:
    """The sequence settings of perf_analyzer's three options (``id_range``: ``START[:END]``), or
    SequenceSettingsError (a DescriptionError) naming the bad value and what is valid."""
    start, _, end = str(id_range).partition(":")
    try:
        start, end = int(start), int(end) if end else 0
    except ValueError:
        raise SequenceSettingsError(f"--sequence-id-range {id_range!r}: expected START or START:END (whole "
                                    f"numbers)") from None
    return SequenceSettings(length=length, variation_percent=variation_percent, id_start=start, id_end=end)


@dataclass(frozen=True)
class DynamicBatching:
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_microseconds: int = 0
    preserve_ordering: bool = False


@dataclass(frozen=True)
class ControlInput:
    name: str  # the tensor the server fills (the client never sends it)
    kind: str  # CONTROL_KINDS
    datatype: str  # Triton data type, e.g. "INT32"


@dataclass(frozen=True)
class SequenceBatching:
    strategy: str  # "direct" (one batch slot per live sequence; the default) or "oldest"
    max_sequence_idle_microseconds: int  # 1 s when the configuration leaves it 0
    controls: tuple[ControlInput, ...] = ()
    states: tuple[tuple[str, str], ...] = ()  # implicit state: (input_name, output_name)
    max_queue_delay_microseconds: int = 0  # the strategy's (direct or oldest) wait for a fuller batch
    preferred_batch_sizes: tuple[int, ...] = ()  # oldest only (direct has none)
    max_candidate_sequences: int = 0  # oldest only: its slots per instance (0: max_batch_size's)


@dataclass(frozen=True)
class InstanceGroup:
    kind: str  # "KIND_CPU", "KIND_GPU", "KIND_MODEL", "KIND_AUTO"
    count: int
    gpus: tuple[int, ...] = ()


@dataclass(frozen=True)
class VersionPolicy:
    kind: str  # "latest", "all" or "specific"
    versions: tuple[int, ...] = ()  # specific: the versions named; latest: (num_versions,)

    def served(self, available: Sequence[int]) -> tuple[int, ...]:
        """The versions Triton serves of ``available`` (the numeric version directories), in ascending order."""
        found = sorted(set(int(v) for v in available))
        if self.kind == "all":
            return tuple(found)
        if self.kind == "specific":
            return tuple(v for v in found if v in self.versions)
        return tuple(found[-(self.versions[0] if self.versions else 1):]) if found else ()

    def describe(self) -> str:
        if self.kind == "latest":
            return f"latest {{num_versions: {self.versions[0] if self.versions else 1}}}"
        if self.kind == "specific":
            return f"specific {{versions: {list(self.versions)}}}"
        return "all"


@dataclass(frozen=True)
class Step:
    """One step of an ensemble: the composing model and how its tensors map onto the ensemble's."""

    model: str
    version: int  # -1: the latest the composing model serves
    input_map: Mapping[str, str]  # the step model's input -> the ensemble tensor feeding it
    output_map: Mapping[str, str]  # the step model's output -> the ensemble tensor it writes


@dataclass(frozen=True)
class ModelDescription:
    """A deployment as its configuration declares it (see the module docstring)."""

    name: str
    platform: str  # "onnxruntime_onnx", "pytorch_libtorch", "ensemble", ... ("" when only a backend is named)
    backend: str  # "onnxruntime", "pytorch", "python", ... ("" for an ensemble)
    max_batch_size: int  # 0: no batch dimension (batchless)
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    scheduler: str = "none"  # SCHEDULERS
    dynamic_batching: DynamicBatching | None = None
    sequence_batching: SequenceBatching | None = None
    decoupled: bool = False
    instance_groups: tuple[InstanceGroup, ...] = ()
    version_policy: VersionPolicy = VersionPolicy("latest", (1,))
    response_cache: bool = False
    default_model_filename: str = ""
    steps: tuple[Step, ...] = ()
    composing: tuple["ModelDescription", ...] = ()  # an ensemble's step models or a BLS model's callees, once each
    config: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)  # the configuration's JSON
    # how its sequences are sent, where it is a sequence model (perf_analyzer's --sequence-* options; None: their
    # defaults): not a fact of the configuration, the run's choice for this deployment
    sequences: SequenceSettings | None = field(default=None, repr=False, compare=False)

    def with_sequences(self, settings: SequenceSettings | None = None, **values) -> "ModelDescription":
        """This description with its sequences sent as ``settings`` (or as the SequenceSettings ``values`` name)."""
        return replace(self, sequences=settings if settings is not None or not values else SequenceSettings(**values))

    def sequence_settings(self, seed: int = 0) -> SequenceSettings:
        """How its sequences are sent: the run's settings, else perf_analyzer's defaults drawn with ``seed``."""
        return self.sequences or SequenceSettings(seed=seed)

    @property
    def batching(self) -> bool:
        """Whether requests carry a batch dimension (``max_batch_size`` > 0)."""
        return self.max_batch_size > 0

    @property
    def batcher(self) -> DynamicBatching | None:
        """What groups this deployment's requests into executions, in the dynamic batcher's terms: its dynamic
        batching, or its sequence batcher's (the strategy's preferred sizes and queue delay; ``direct`` batches the
        slots that have a request ready). None where nothing groups its requests: no batcher, batchless, or an
        ensemble's scheduler (its steps batch on their own)."""
        if not self.batching:
            return None
        if self.sequence_batching is not None:
            sb = self.sequence_batching
            return DynamicBatching(sb.preferred_batch_sizes, sb.max_queue_delay_microseconds)
        return self.dynamic_batching

    @property
    def sequence_slots(self) -> int:
        """The sequences its sequence batcher schedules at once, as Triton counts them (0 without one): per instance,
        ``oldest``'s ``max_candidate_sequences``, else ``max_batch_size`` (at least 1); others wait in the backlog."""
        sb = self.sequence_batching
        return (sb.max_candidate_sequences or max(1, self.max_batch_size)) * self.instance_count if sb else 0

    @property
    def ensemble(self) -> bool:
        return self.scheduler == "ensemble"

    @property
    def sequence(self) -> bool:
        return self.scheduler == "sequence"

    @property
    def python(self) -> bool:
        """A python-backend model (possibly a BLS one, calling others from ``model.py``)."""
        return self.backend == "python"

    @property
    def instance_count(self) -> int:
        """Instances Triton runs: each group's count per GPU it lists (once where it lists none). A group with no
        count, or no group at all, is Triton's default (on a CPU host two KIND_CPU instances of an onnxruntime or
        TensorFlow model, one of any other): read it from the configuration the server runs
        (:func:`as_served`), never from the file's silence."""
        return sum(g.count * max(len(g.gpus), 1) for g in self.instance_groups) or 1

    @property
    def kinds(self) -> tuple[str, ...]:
        """What kind of deployment this is, in words a report prints: e.g. ("ensemble",), ("sequence (oldest)",
        "decoupled"), ("python", "BLS")."""
        found = []
        if self.ensemble:
            found.append("ensemble")
        if self.sequence_batching is not None:
            found.append(f"sequence ({self.sequence_batching.strategy})")
        if self.python:
            found.append("BLS" if self.composing else "python")
        if self.decoupled:
            found.append("decoupled")
        if not self.batching:
            found.append("batchless")
        return tuple(found) or ("model",)

    def all_composing(self) -> tuple["ModelDescription", ...]:
        """Every composing model, nested ensembles' included, each once (depth first, in step order)."""
        found: dict[str, ModelDescription] = {}
        for model in self.composing:
            found.setdefault(model.name, model)
            for inner in model.all_composing():
                found.setdefault(inner.name, inner)
        return tuple(found.values())

    def input(self, name: str) -> TensorSpec:
        return self._tensor(self.inputs, "input", name)

    def output(self, name: str) -> TensorSpec:
        return self._tensor(self.outputs, "output", name)

    def _tensor(self, tensors: tuple[TensorSpec, ...], kind: str, name: str) -> TensorSpec:
        for tensor in tensors:
            if tensor.name == name:
                return tensor
        raise DescriptionError(f"{self.name}: no {kind} {name!r}; valid choices: "
                               f"{', '.join(t.name for t in tensors)}")


def _tensor(entry: Mapping[str, Any], model: str) -> TensorSpec:
    datatype = str(entry.get("data_type", "TYPE_INVALID")).removeprefix("TYPE_")
    if datatype not in NUMPY_DTYPES:
        raise DescriptionError(f"{model}: tensor {entry.get('name')!r} has data type {datatype}; valid choices: "
                               f"{', '.join(NUMPY_DTYPES)}")
    dims = entry.get("dims") or []
    return TensorSpec(str(entry.get("name", "")), NUMPY_DTYPES[datatype], tuple(int(d) for d in dims))


def _int(value: Any, default: int = 0) -> int:
    return int(value) if value not in (None, "") else default


def describe(config: Mapping[str, Any], lookup: Callable[[str], Mapping[str, Any]] | None = None,
             composing: Sequence[str] = (), _seen: tuple[str, ...] = ()) -> ModelDescription:
    """The description of the model whose configuration (JSON, protobuf field names) is ``config``.

    ``lookup(name)`` returns another model's configuration (from the repository or the server): an ensemble's
    steps are resolved through it, recursively. ``composing`` names the models a BLS model calls (resolved the same
    way). A step whose model ``lookup`` cannot give, or an ensemble that contains itself, raises DescriptionError.
    """
    name = str(config.get("name", ""))
    chain = _seen + (name,)
    platform = str(config.get("platform", ""))
    backend = str(config.get("backend", ""))
    scheduler = next((k.removesuffix("_batching").removesuffix("_scheduling") for k in
                      ("dynamic_batching", "sequence_batching", "ensemble_scheduling") if k in config), "none")
    if platform == "ensemble" and scheduler != "ensemble":
        raise DescriptionError(f"{name}: platform ensemble without ensemble_scheduling")
    dynamic = None
    if "dynamic_batching" in config:
        db = config["dynamic_batching"] or {}
        dynamic = DynamicBatching(tuple(int(b) for b in db.get("preferred_batch_size", [])),
                                  _int(db.get("max_queue_delay_microseconds")), bool(db.get("preserve_ordering")))
    sequence = None
    if "sequence_batching" in config:
        sb = config["sequence_batching"] or {}
        controls = []
        for entry in sb.get("control_input", []):
            for control in entry.get("control", []):
                kind = str(control.get("kind", "CONTROL_SEQUENCE_START"))
                datatype = str(control.get("data_type", "TYPE_INT32" if "int32_false_true" in control
                                           else "TYPE_FP32" if "fp32_false_true" in control
                                           else "TYPE_BOOL" if "bool_false_true" in control
                                           else "TYPE_UINT64")).removeprefix("TYPE_")
                controls.append(ControlInput(str(entry.get("name", "")), kind, datatype))
        strategy = "oldest" if "oldest" in sb else "direct"
        chosen = sb.get(strategy) or {}
        sequence = SequenceBatching(
            strategy=strategy,
            max_sequence_idle_microseconds=_int(sb.get("max_sequence_idle_microseconds"), 1_000_000) or 1_000_000,
            controls=tuple(controls),
            states=tuple((str(s.get("input_name", "")), str(s.get("output_name", ""))) for s in sb.get("state", [])),
            max_queue_delay_microseconds=_int(chosen.get("max_queue_delay_microseconds")),
            preferred_batch_sizes=tuple(int(b) for b in chosen.get("preferred_batch_size", [])),
            max_candidate_sequences=_int(chosen.get("max_candidate_sequences")) if strategy == "oldest" else 0)
    groups = tuple(InstanceGroup(str(g.get("kind", "KIND_AUTO")), _int(g.get("count"), 1) or 1,
                                 tuple(int(d) for d in g.get("gpus", []))) for g in config.get("instance_group", []))
    policy_json = config.get("version_policy") or {}
    if "all" in policy_json:
        policy = VersionPolicy("all")
    elif "specific" in policy_json:
        policy = VersionPolicy("specific", tuple(int(v) for v in (policy_json["specific"] or {}).get("versions", [])))
    else:
        latest = policy_json.get("latest") or {}
        policy = VersionPolicy("latest", (_int(latest.get("num_versions"), 1) or 1,))
    steps = tuple(Step(str(s.get("model_name", "")), _int(s.get("model_version"), -1),
                       dict(s.get("input_map", {})), dict(s.get("output_map", {})))
                  for s in (config.get("ensemble_scheduling") or {}).get("step", []))
    wanted = list(dict.fromkeys([s.model for s in steps] + list(composing)))
    resolved = []
    for model in wanted:
        if model in chain:
            raise DescriptionError(f"{name}: step model {model!r} contains {name} (a cycle: {' -> '.join(chain)})")
        if lookup is None:
            raise DescriptionError(f"{name}: composing model {model!r} cannot be looked up (no repository or server "
                                   f"given)")
        try:
            found = lookup(model)
        except (KeyError, FileNotFoundError, LookupError) as exc:
            raise DescriptionError(f"{name}: composing model {model!r} is not in the repository ({exc})") from None
        resolved.append(describe(found, lookup, (), chain))
    return ModelDescription(
        name=name, platform=platform, backend=backend or ("" if platform == "ensemble" else _backend_of(platform)),
        max_batch_size=_int(config.get("max_batch_size")),
        inputs=tuple(_tensor(t, name) for t in config.get("input", [])),
        outputs=tuple(_tensor(t, name) for t in config.get("output", [])),
        scheduler=scheduler, dynamic_batching=dynamic, sequence_batching=sequence,
        decoupled=bool((config.get("model_transaction_policy") or {}).get("decoupled")),
        instance_groups=groups, version_policy=policy,
        response_cache=bool((config.get("response_cache") or {}).get("enable")),
        default_model_filename=str(config.get("default_model_filename", "")),
        steps=steps, composing=tuple(resolved), config=dict(config))


def as_served(declared: ModelDescription, served: ModelDescription) -> ModelDescription:
    """What a deployment's file declares (``declared``: its fields and its ``config``, which a check holds the server
    to), with Triton's defaults where the file is silent, read from the configuration the server runs (``served``):
    no instance group, or a group without a count or GPUs (Triton 2.51's ``SetDefaultInstanceCount``: two KIND_CPU
    instances of an onnxruntime or TensorFlow model, one of any other; one per GPU on a GPU host). The same for each composing model, by name. A value the file states is kept, even where
    the server runs another (that difference is what conformance shows)."""
    groups = declared.instance_groups
    written = list(declared.config.get("instance_group", []))
    if not written:
        groups = served.instance_groups
    elif len(served.instance_groups) == len(written):
        groups = tuple(InstanceGroup(g.kind if "kind" in w else s.kind,
                                     g.count if _int(w.get("count")) > 0 else s.count,
                                     g.gpus if w.get("gpus") else s.gpus)
                       for g, w, s in zip(declared.instance_groups, written, served.instance_groups))
    others = {m.name: m for m in served.composing}
    composing = tuple(as_served(m, others[m.name]) if m.name in others else m for m in declared.composing)
    return replace(declared, instance_groups=groups, composing=composing)


#: platform -> the backend Triton maps it to (``model_config_utils.cc``)
PLATFORM_BACKENDS = {"onnxruntime_onnx": "onnxruntime", "pytorch_libtorch": "pytorch", "tensorrt_plan": "tensorrt",
                     "tensorflow_graphdef": "tensorflow", "tensorflow_savedmodel": "tensorflow"}


def _backend_of(platform: str) -> str:
    return PLATFORM_BACKENDS.get(platform, "")
