"""Where reduced precision departs from fp32, module by module: ``tritonsuite fp16-diagnose``.

Forward hooks record every leaf module's output in a reference run (fp32 on the CPU) and in a candidate run (fp16
on a GPU, the same with cuDNN off, GPU fp32 with TF32 off, or on the CPU fp16 storage emulated: parameters and each
leaf module's output rounded to half). Leaf modules are compared in call order by the relative L2 error of their
first floating output; the first above ``threshold`` names the culprit. The same input goes through both; the
modules' outputs are compared on the CPU in float64.

One command on a lent GPU runs every comparison for every seed model and writes one JSON line per (model,
comparison) to ``--out``; on a CPU host the emulated comparison runs (that is what CI tests).
"""
from __future__ import annotations

import copy
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from tritonsuite.core.spec import ModelSpec

DEFAULT_THRESHOLD = 0.01  # relative L2 error of a module's output against fp32's
DIAGNOSED = (("bert", "large"), ("wide_deep", "full"), ("fastpitch", "large"), ("nnunet", "large"), ("tft", "large"))
#: comparisons: name -> (candidate device, dtype, cuDNN enabled); the reference is always CPU fp32
COMPARISONS = {
    "cpu-fp16-emulated": ("cpu", "emulated", True),
    "cuda-fp32-no-tf32": ("cuda", "fp32", True),
    "cuda-fp16": ("cuda", "fp16", True),
    "cuda-fp16-no-cudnn": ("cuda", "fp16", False),
}


@dataclass(frozen=True)
class ModuleDivergence:
    name: str  # the module's qualified name in the model
    kind: str  # its class
    relative_l2: float
    max_abs: float


@dataclass(frozen=True)
class Diagnosis:
    model: str
    size: str
    comparison: str
    device: str
    threshold: float
    modules: int  # leaf modules compared
    outputs_relative_l2: dict[str, float]
    first_divergent: ModuleDivergence | None
    worst: ModuleDivergence | None
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        out = ", ".join(f"{k} {v:.3g}" for k, v in self.outputs_relative_l2.items())
        first = (f"first module above {self.threshold:g}: {self.first_divergent.name} ({self.first_divergent.kind}, "
                 f"{self.first_divergent.relative_l2:.3g})" if self.first_divergent else
                 f"no module above {self.threshold:g}")
        return f"{self.model}:{self.size} {self.comparison} on {self.device}: outputs rel L2 {out}; {first} " \
               f"of {self.modules} leaf modules"


def emulate_half(module):
    """A copy of ``module`` with fp16 storage emulated in fp32 compute: parameters and buffers rounded to half, and
    each leaf module's floating output rounded to half by a forward hook (the model's own ``.half()`` decides
    what is stored in half). Fast on a CPU at any size (no fp16
    kernels), it shows what half's range and rounding do, not what fp16 kernels (cuDNN's) do."""

    # the model's own .half() rounds what it stores in half (a model may keep statistics in fp32), then back
    emulated = copy.deepcopy(module).half().float()

    def round_output(_module, _inputs, output):
        return _map_floats(output, lambda t: t.half().float())

    for sub in emulated.modules():
        if not list(sub.children()):
            sub.register_forward_hook(round_output)
    return emulated


def _map_floats(value, fn):
    import torch

    if isinstance(value, torch.Tensor):
        return fn(value) if value.is_floating_point() else value
    if isinstance(value, (tuple, list)):
        return type(value)(_map_floats(v, fn) for v in value)
    return value


def _first_float(value):
    import torch

    if isinstance(value, torch.Tensor):
        return value if value.is_floating_point() else None
    if isinstance(value, (tuple, list)):
        for v in value:
            found = _first_float(v)
            if found is not None:
                return found
    return None


def record_leaf_outputs(module, arguments: tuple, each=None) -> tuple[list[tuple[str, str, np.ndarray]], tuple]:
    """Run ``module`` on ``arguments``; return each leaf module's first floating output in call order (name, class,
    a float32 copy on the CPU: exact for an fp32 or fp16 run, half float64's memory) and the module's outputs.
    With ``each``, every such output is handed to ``each(name, class, tensor)`` as it is produced and none is kept
    (a candidate measured against a reference: nnU-Net large's leaves are 4.4 GiB a volume in float32)."""
    import torch

    recorded: list[tuple[str, str, np.ndarray]] = []
    handles = []
    for name, sub in module.named_modules():
        if list(sub.children()):
            continue

        def hook(_m, _i, output, name=name, kind=type(sub).__name__):
            found = _first_float(output)
            if found is None:
                return
            if each is not None:
                each(name, kind, found.detach())
            else:  # a copy: a later in-place module (LeakyReLU(inplace=True)) would change the output itself
                recorded.append((name, kind, found.detach().cpu().float().numpy().copy()))

        handles.append(sub.register_forward_hook(hook))
    try:
        with torch.inference_mode():
            outputs = module(*arguments)
    finally:
        for h in handles:
            h.remove()
    return recorded, outputs if isinstance(outputs, (tuple, list)) else (outputs,)


def relative_l2(candidate: np.ndarray, reference: np.ndarray) -> float:
    if candidate.shape != reference.shape:
        return float("inf")
    if not np.isfinite(candidate).all():
        return float("inf")
    return float(np.linalg.norm(candidate - reference) / max(np.linalg.norm(reference), 1e-30))


def divergence(name: str, kind: str, candidate: np.ndarray, reference: np.ndarray) -> ModuleDivergence:
    """One module's candidate output against its reference output, in float64."""
    candidate, reference = np.asarray(candidate, np.float64), np.asarray(reference, np.float64)
    same = candidate.shape == reference.shape
    return ModuleDivergence(name, kind, relative_l2(candidate, reference),
                            float(np.abs(candidate - reference).max()) if same else float("inf"))


def _by_call(entries):
    """((name, call index), class, value) of leaf outputs in call order: a module called twice is two entries."""
    seen: dict[str, int] = {}
    for name, kind, value in entries:
        seen[name] = seen.get(name, 0) + 1
        yield (name, seen[name]), kind, value


def first_and_worst(reference: list, measured: dict, threshold: float):
    """In the reference's call order, the modules measured (``measured``: (name, call index) -> ModuleDivergence):
    how many, the first above ``threshold`` and the worst (the earlier of equals)."""
    first = worst = None
    compared = 0
    for key, _, _ in _by_call(reference):
        found = measured.get(key)
        if found is None:
            continue  # a module the candidate never called
        compared += 1
        if found.relative_l2 > threshold and first is None:
            first = found
        if worst is None or found.relative_l2 > worst.relative_l2:
            worst = found
    return compared, first, worst


def measure_against(reference: list):
    """``(measured, each)``: ``each(name, class, array)`` measures a candidate's leaf output, as it comes, against the
    reference's output of the same call (by name and call index), into ``measured`` ((name, call index) ->
    ModuleDivergence); nothing else of the candidate is kept."""
    references = {key: value for key, _, value in _by_call(reference)}
    measured: dict = {}
    calls: dict[str, int] = {}

    def each(name: str, kind: str, value: np.ndarray) -> None:
        calls[name] = calls.get(name, 0) + 1
        if (key := (name, calls[name])) in references:
            measured[key] = divergence(name, kind, value, references[key])
    return measured, each


def compare_modules(reference: list, candidate: list, threshold: float):
    """Pair the two runs' leaf outputs in call order (by name and call index) and find the first and the worst
    module above ``threshold``."""
    measured, each = measure_against(reference)
    for name, kind, value in candidate:
        each(name, kind, value)
    return first_and_worst(reference, measured, threshold)


@dataclass(frozen=True)
class Reference:
    """The CPU fp32 run every comparison of one model is measured against: its fp32 copy of the model, the input
    it ran on, each leaf module's output and the model's outputs."""
    module: object
    arguments: tuple
    leaves: list
    outputs: tuple
    batch_size: int


def reference_run(spec: ModelSpec, checkpoint: Path | None = None, batch_size: int = 2, module=None) -> Reference:
    """Run ``spec``'s eager model in fp32 on the CPU on its example input (seed 0) once, hooks on every leaf module:
    the reference each comparison is measured against (a large model's CPU run is the diagnosis's dearest part)."""
    import torch

    reference_module = copy.deepcopy(module if module is not None else spec.build(checkpoint)).float().eval()
    inputs = spec.example_inputs(batch_size, 0)
    arguments = tuple(torch.from_numpy(inputs[t.name]) for t in spec.inputs)
    leaves, outputs = record_leaf_outputs(reference_module, arguments)
    return Reference(reference_module, arguments, leaves, outputs, batch_size)


def diagnose(spec: ModelSpec, comparison: str, checkpoint: Path | None = None, batch_size: int = 2,
             threshold: float = DEFAULT_THRESHOLD, module=None, reference: Reference | None = None) -> Diagnosis:
    """Compare ``spec``'s eager model under ``comparison`` (:data:`COMPARISONS`) with CPU fp32, module by module;
    ``reference`` (:func:`reference_run`, of the same batch size) spares running the fp32 model again."""
    import torch

    device, dtype, cudnn = COMPARISONS[comparison]
    if reference is None:
        reference = reference_run(spec, checkpoint, batch_size, module)
    elif reference.batch_size != batch_size:
        raise ValueError(f"a reference of batch {reference.batch_size} for a diagnosis of batch {batch_size}")
    reference_module, arguments = reference.module, reference.arguments
    leaves, reference_out = reference.leaves, reference.outputs
    notes = []
    if dtype == "emulated":
        candidate_module = emulate_half(reference_module)
        candidate_args = arguments
    else:
        candidate_module = copy.deepcopy(reference_module).to(device)
        if dtype == "fp16":
            candidate_module = candidate_module.half()
        compute = torch.float16 if dtype == "fp16" else torch.float32
        candidate_args = tuple(a.to(device).to(compute) if a.is_floating_point() else a.to(device) for a in arguments)
    previous = (torch.backends.cudnn.enabled, torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cudnn.enabled = cudnn
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # fp32 means fp32
    measured, each = measure_against(leaves)  # as each leaf runs: no candidate output is kept
    try:
        candidate_out = record_leaf_outputs(
            candidate_module, candidate_args, each=lambda n, k, t: each(n, k, t.cpu().double().numpy()))[1]
    finally:
        torch.backends.cudnn.enabled, torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = previous
    if not cudnn:
        notes.append("cuDNN disabled (torch.backends.cudnn.enabled=False)")
    compared, first, worst = first_and_worst(leaves, measured, threshold)
    outputs = {t.name: relative_l2(c.detach().double().cpu().numpy(), r.detach().double().cpu().numpy())
               for t, r, c in zip(spec.outputs, reference_out, candidate_out)
               if r.is_floating_point() and c.is_floating_point()}
    for t, r, c in zip(spec.outputs, reference_out, candidate_out):
        if not r.is_floating_point():
            same = float(np.mean(r.cpu().numpy() == c.cpu().numpy())) if r.shape == c.shape else 0.0
            notes.append(f"{t.name}: {same:.4f} of integer elements equal")
    return Diagnosis(model=spec.name, size=spec.size, comparison=comparison, device=_device_name(device),
                     threshold=threshold, modules=compared, outputs_relative_l2=outputs, first_divergent=first,
                     worst=worst, notes=notes)


def emulated_accuracy(spec: ModelSpec, checkpoint: Path | None = None, batch_size: int = 2, module=None):
    """fp16 storage emulated (:func:`emulate_half`) against fp32, both eager on the CPU, judged by the per-model
    fp16 rules over the spec's accuracy data: the check of the ``large`` shapes in CPU CI, where fp16 kernels would
    take minutes a volume. A task metric the fp32 model itself misses (seeded weights against ground truth) says
    nothing about precision: it is named in the description, not judged. Returns an
    :class:`~tritonsuite.judge.accuracy.AccuracyResult` (deployment ``<model>_<size>_eager_fp16-emulated``)."""
    import time

    from tritonsuite.deploy.export import eager_runner
    from tritonsuite.core.tensors import compare_outputs, run_batched
    from tritonsuite.judge.accuracy import AccuracyResult

    start = time.perf_counter()
    reference_module = copy.deepcopy(module if module is not None else spec.build(checkpoint)).float().eval()
    data = spec.accuracy_data(None, checkpoint)
    served = run_batched(eager_runner(emulate_half(reference_module), spec), data.inputs, batch_size)
    reference = run_batched(eager_runner(reference_module, spec), data.inputs, batch_size)
    comparisons = compare_outputs(served, reference, spec, "fp16")
    own = [m.name for m in data.score(reference, reference, "fp16") if not m.passed]
    metrics = data.score(served, reference, "fp16")
    failures = [c.describe() for c in comparisons if not c.passed] + \
        [m.describe() for m in metrics if not m.passed and m.name not in own]
    description = data.description + (f"; not judged, the fp32 model itself misses: {', '.join(own)}" if own else "")
    return AccuracyResult(model=spec.name, deployment=f"{spec.name}_{spec.size}_eager_fp16-emulated", precision="fp16",
                          samples=len(next(iter(data.inputs.values()))), comparisons=comparisons, metrics=metrics,
                          seconds=time.perf_counter() - start, description=description, failures=failures)


def _device_name(device: str) -> str:
    import torch

    if device == "cuda":
        return torch.cuda.get_device_name(0)
    from tritonsuite.core.device import cpu_name

    return f"CPU ({cpu_name()})"


# ------------------------------------------------------------------------------------------------- subcommand
def add_fp16_diagnose_arguments(parser) -> None:
    parser.add_argument("--models", default=",".join(f"{m}:{s}" for m, s in DIAGNOSED),
                        help="comma-separated model:size (default: the five seed models at the sizes the H100 ran)")
    parser.add_argument("--comparisons", default="", help=f"comma-separated, of {', '.join(COMPARISONS)} (default: "
                        "all that this host can run)")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                        help="relative L2 error above which a module diverges")
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--out", default="reports/fp16-diagnosis.jsonl", help="one JSON line per diagnosis")
    parser.add_argument("--accuracy", action="store_true", help="also judge each model's fp16 storage, emulated on "
                        "the CPU, against fp32 by its fp16 rules over its accuracy data (one line per model; the "
                        "exit status is 1 when one fails)")
    parser.add_argument("--model-spec", action="append", default=[], metavar="PATH",
                        help="a Python file defining SPECS (your own models, as pytest's --model-spec); repeatable")


def run_fp16_diagnose(args, parser) -> int:
    from tritonsuite.core.device import cuda_available
    from tritonsuite.models import RegistryError, default_registry

    try:
        registry = default_registry(args.model_spec)
    except RegistryError as exc:
        parser.error(str(exc))
    pairs = [m.split(":", 1) if ":" in m else (m, "cpu") for m in args.models.split(",") if m]
    chosen = [c for c in args.comparisons.split(",") if c] or [
        c for c, (device, _, _) in COMPARISONS.items() if device == "cpu" or cuda_available()]
    bad = [c for c in chosen if c not in COMPARISONS]
    if bad:
        parser.error(f"--comparisons {','.join(bad)}: valid choices: {', '.join(COMPARISONS)}")
    if any(COMPARISONS[c][0] == "cuda" for c in chosen) and not cuda_available():
        parser.error(f"--comparisons {','.join(chosen)}: this host has no CUDA device; valid here: cpu-fp16-emulated")
    specs = []
    for name, size in pairs:
        try:
            specs.append(registry.get(name, size))
        except RegistryError as exc:
            parser.error(str(exc))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    failed: list[str] = []
    with out.open("a") as f:
        for spec in specs:
            module = spec.build(None)
            reference = reference_run(spec, batch_size=args.batch_size, module=module)
            for comparison in chosen:
                found = diagnose(spec, comparison, batch_size=args.batch_size, threshold=args.threshold,
                                 reference=reference)
                print(found.line() + (f" ({'; '.join(found.notes)})" if found.notes else ""), flush=True)
                f.write(json.dumps(asdict(found)) + "\n")
            if args.accuracy:
                judged = emulated_accuracy(spec, batch_size=args.batch_size, module=module)
                verdict = "; ".join(judged.failures) or ", ".join(f"{m.name} {m.value:.4g}" for m in judged.metrics)
                print(f"{spec.key} cpu-fp16-emulated accuracy against fp32: {'PASS' if judged.passed else 'FAIL'} "
                      f"({judged.samples} samples, {judged.description}; {judged.seconds:.1f} s): {verdict}",
                      flush=True)
                if not judged.passed:
                    failed.append(spec.key)
    print(f"wrote {out}")
    if args.accuracy:
        print(f"emulated fp16 accuracy: {len(specs) - len(failed)} of {len(specs)} passed"
              + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0
