"""Export a model spec to a serving artifact in any registered format (:mod:`tritonsuite.deploy.formats`), verified
against eager through the stock backend's own behaviour (:mod:`tritonsuite.deploy.backends`), and cached.

Artifacts are cached on disk under a key hashed from (spec, weights, checkpoint, format, precision, exporter
versions): a second run with the same inputs reuses the file and its recorded verification.
"""
from __future__ import annotations

import importlib.metadata
import copy
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tritonsuite.core.device import export_device, unavailable_reason
from tritonsuite.core.integrity import file_record, mismatch, notice
from tritonsuite.core.spec import PRECISIONS, ModelSpec, file_digest, path_digest, stable_hash
from tritonsuite.core.tensors import compare_outputs
from tritonsuite.deploy.backends import backend_for
from tritonsuite.deploy.formats import get_format, spec_formats
from tritonsuite.deploy.formats.base import ExportMismatch, ExportUnsupported, compute_dtype

EXPORT_VERSION = 4  # bump when the export procedure changes, to invalidate cached artifacts
VERIFY_BATCH_SIZES = (1, 3)
#: a reduced-precision artifact built on the CPU is verified at batch 1 only (still not the batch it was traced at):
#: torch's CPU half kernels have no BLAS (nnU-Net cpu's conv3d: 2.0 s a volume in fp16 against 0.08 s in fp32), so
#: batches 1 and 3 on both sides were most of the accuracy gate's fp16 time, and the same graph in fp32 is verified
#: at both; the accuracy scenario then serves it at the deployment's batch sizes against the fp32 eager model
CPU_REDUCED_VERIFY_BATCH_SIZES = (1,)

__all__ = ["Artifact", "ExportMismatch", "ExportUnsupported", "artifact_session", "cache_key", "check_output_dtypes",
           "check_supported", "eager_runner", "export"]


@dataclass(frozen=True)
class Artifact:
    model: str
    size: str
    format: str
    precision: str
    path: Path
    key: str
    max_abs_error: dict[str, float]
    max_rel_error: dict[str, float]
    verified_batch_sizes: tuple[int, ...]
    versions: dict[str, str]
    export_seconds: float
    size_bytes: int = 0  # of the artifact file: checked, with its sha256, before a cached artifact is trusted
    sha256: str = ""
    cached: bool = field(default=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["path"] = self.path.name
        data.pop("cached")
        return data


def exporter_versions() -> dict[str, str]:
    versions = {"tritonsuite-export": str(EXPORT_VERSION)}
    for dist in ("torch", "onnx", "transformers"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = "absent"
    return versions


def cache_key(spec: ModelSpec, fmt: str, precision: str, checkpoint: Path | None = None,
              build: dict[str, Any] | None = None) -> str:
    """The artifact's cache key. ``build`` is what else decides the format's artifact (its
    :meth:`~tritonsuite.deploy.formats.base.Format.cache_fields`: a plan's TensorRT version, GPU and shapes)."""
    fields = {
        "spec": spec.fingerprint(),
        "weights": [file_digest(p) for p in spec.weights_files()],
        "checkpoint": path_digest(checkpoint),
        "format": fmt,
        "precision": precision,
        "versions": exporter_versions(),
    }
    if build:  # only formats that have such fields: every other format's key stays what it was
        fields["build"] = build
    if precision == "mixed":  # its recipe (fp32 module types, blocked ops); fp32's and fp16's keys stay as they were
        fields["recipe"] = get_format(fmt).mixed_recipe(spec)
    return stable_hash(fields)


def check_supported(spec: ModelSpec, fmt: str, precision: str) -> None:
    """Raise ValueError for names that do not exist, ExportUnsupported for combinations this model/host lacks."""
    form = get_format(fmt)
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; valid choices: {', '.join(PRECISIONS)}")
    if fmt not in spec_formats(spec):
        raise ExportUnsupported(f"{spec.key} does not support {fmt}; it supports {', '.join(spec_formats(spec))}")
    if precision not in spec.supported_precisions:
        raise ExportUnsupported(f"{spec.key} does not support {precision}; it supports "
                                f"{', '.join(spec.supported_precisions)}")
    reason = (form.unavailable_reason(spec, precision) or backend_for(fmt).supports(spec)
              or unavailable_reason(precision))
    if reason:
        raise ExportUnsupported(f"{spec.key} as {fmt}: {reason}")


def _to_torch(spec: ModelSpec, inputs: dict[str, np.ndarray], device: str):
    import torch

    return tuple(torch.from_numpy(inputs[t.name]).to(device) for t in spec.inputs)


def eager_runner(module, spec: ModelSpec, device: str = "cpu"):
    """The eager reference as a dict-in/dict-out callable (outputs as float32/float numpy arrays)."""
    import torch

    compute = compute_dtype(module)
    if getattr(module, "takes_declared_dtypes", False):  # it casts its own inputs (after an fp32 island)
        compute = torch.float32

    def run(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        with torch.inference_mode():  # a reduced-precision module takes its floating inputs in its own dtype
            outputs = module(*(t.to(compute) if t.is_floating_point() else t for t in _to_torch(spec, inputs, device)))
        if not isinstance(outputs, (tuple, list)):
            outputs = (outputs,)
        return {t.name: o.detach().float().cpu().numpy() if o.is_floating_point() else o.cpu().numpy()
                for t, o in zip(spec.outputs, outputs)}

    return run


def artifact_session(spec: ModelSpec, path: str | Path, fmt: str, device: str = "cpu", config=None):
    """Run an artifact in-process exactly as its stock backend serves it: the backend's stand-in session over the
    deployment's configuration (JSON, :func:`~tritonsuite.deploy.repository.model_config`; by default the spec's
    tensors and the backend's default parameters)."""
    from tritonsuite.deploy.repository import model_config

    if config is None:
        config = model_config(spec.name, spec, fmt, max_batch_size=64,
                              instance_kind="KIND_GPU" if device.startswith("cuda") else "KIND_CPU")
    return backend_for(fmt).session(path, dict(config), device)


def check_output_dtypes(outputs: dict[str, np.ndarray], spec: ModelSpec, what: str) -> None:
    """Raise :class:`ExportMismatch` in one line when an output the artifact gives (as its stock backend runs it)
    is not of the dtype the configuration declares: a reduced-precision conversion must keep fp32 outputs fp32."""
    for t in spec.outputs:
        found = np.asarray(outputs[t.name]).dtype if t.name in outputs else None
        if found != np.dtype(t.dtype):
            raise ExportMismatch(f"{what}: output {t.name} is {found}, the configuration declares {t.dtype} "
                                 f"(TYPE_{t.triton_dtype})")


def _shapes(inputs: dict[str, np.ndarray]) -> str:
    return ", ".join(f"{k} {list(v.shape)}" for k, v in inputs.items())


def _cached(final: Path) -> Artifact | None:
    """The artifact cached in ``final`` when its file still has the size and sha256 ``artifact.json`` recorded; else
    one line of notice, the entry is removed and None (the caller rebuilds it)."""
    try:
        meta = json.loads((final / "artifact.json").read_text())
        meta["path"] = final / meta["path"]
        meta["verified_batch_sizes"] = tuple(meta["verified_batch_sizes"])
        artifact = Artifact(**meta, cached=True)
        reason = mismatch(artifact.path, artifact.size_bytes, artifact.sha256)
    except (ValueError, TypeError, KeyError, OSError) as exc:
        reason = f"{final / 'artifact.json'} does not read ({type(exc).__name__}: {exc})"
    if reason is None:
        return artifact
    notice(f"cached artifact {final.name}", reason)
    shutil.rmtree(final, ignore_errors=True)
    return None


def export(spec: ModelSpec, fmt: str, precision: str, cache_dir: str | Path, checkpoint: Path | None = None,
           module=None, verify_batch_sizes: tuple[int, ...] = VERIFY_BATCH_SIZES,
           batch_sizes: tuple[int, ...] = ()) -> Artifact:
    """Export (or reuse from cache) ``spec`` as ``fmt``/``precision`` and verify it against the eager model.

    ``module`` may pass an already built eager module to avoid building it twice. ``batch_sizes`` are the batch
    sizes the deployment will be asked for, its max batch size among them (default: ``verify_batch_sizes``); a
    format built for fixed shapes (a TensorRT plan's optimization profile) covers them, and is verified within them.
    """
    check_supported(spec, fmt, precision)
    form = get_format(fmt)
    batch_sizes = tuple(sorted(set(batch_sizes or verify_batch_sizes)))
    build = form.cache_fields(spec, precision, batch_sizes)
    if build:
        verify_batch_sizes = tuple(b for b in verify_batch_sizes if b <= batch_sizes[-1]) or batch_sizes[:1]
    key = cache_key(spec, fmt, precision, checkpoint, build)
    final = Path(cache_dir) / f"{spec.name}-{spec.size}-{fmt}-{precision}-{key[:16]}"
    meta_file = final / "artifact.json"
    if meta_file.is_file():
        cached = _cached(final)
        if cached is not None:
            return cached

    device = export_device(precision)
    verify_at = (CPU_REDUCED_VERIFY_BATCH_SIZES if device == "cpu" and precision != "fp32"
                 and verify_batch_sizes == VERIFY_BATCH_SIZES else verify_batch_sizes)
    start = time.perf_counter()
    if module is None:
        module = spec.build(checkpoint)
    source = None
    if form.source is not None:  # a chained format is built from another format's (cached, verified) artifact
        source = export(spec, form.source, form.source_precision(precision), cache_dir, checkpoint, module,
                        verify_batch_sizes).path
    # export works on its own copy: the caller's module (the suite's shared fp32 eager reference) is never moved
    # to another device nor converted to half in place
    module = get_format(fmt).prepare(copy.deepcopy(module).to(device), spec, precision, device)
    tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        path = tmp / backend_for(fmt).file_name
        form.write(module, spec, path, _to_torch(spec, spec.example_inputs(2, 0), device), source, batch_sizes,
                   precision=precision)
        runner = artifact_session(spec, path, fmt, device)
        reference = eager_runner(module, spec, device)
        max_abs: dict[str, float] = {}
        max_rel: dict[str, float] = {}
        checks = [(f"batch {b}", spec.example_inputs(b, 1000 + b)) for b in verify_at]
        extra = spec.verification_inputs() if spec.verification_inputs is not None else []
        checks += [(f"verification input {i} (shapes {_shapes(sample)})", sample) for i, sample in enumerate(extra)]
        for where, sample in checks:
            served = runner(sample)
            check_output_dtypes(served, spec, f"{fmt} {precision} artifact of {spec.key}")
            for c in compare_outputs(served, reference(sample), spec, precision):
                if not c.passed:
                    raise ExportMismatch(f"{fmt} artifact of {spec.key} differs from eager at {where}: "
                                         f"{c.describe()}")
                max_abs[c.name] = max(max_abs.get(c.name, 0.0), c.max_abs_error)
                max_rel[c.name] = max(max_rel.get(c.name, 0.0), c.max_rel_error)
        record = file_record(path)
        artifact = Artifact(model=spec.name, size=spec.size, format=fmt, precision=precision, path=final / path.name,
                            size_bytes=int(record["size_bytes"]), sha256=str(record["sha256"]),
                            key=key, max_abs_error=max_abs, max_rel_error=max_rel,
                            verified_batch_sizes=tuple(verify_at),
                            # what the artifact is tied to (a plan: its TensorRT version and compute capability)
                            versions={**exporter_versions(), **{k: v for k, v in build.items() if isinstance(v, str)}},
                            export_seconds=round(time.perf_counter() - start, 3))
        (tmp / "artifact.json").write_text(json.dumps(artifact.to_json(), indent=2))
        try:
            os.rename(tmp, final)
        except OSError:  # another process (an xdist worker) finished the same export first: use theirs
            if not meta_file.is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return artifact
