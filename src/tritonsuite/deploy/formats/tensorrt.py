"""TensorRT plans (``trt``): the spec's ONNX artifact built into a serialized engine with TensorRT's Python API, served
by Triton's ``tensorrt_plan`` platform as ``model.plan``.

The build is explicit-batch with one optimization profile: the batch dimension from 1 up to the largest batch the
deployment is asked for (its max batch size among them; opt at the largest swept batch), each dynamic (-1) input
dim from 1 up to the spec's ``max_shape`` (opt at the example inputs' size). fp16 sets the builder's FP16 flag over
the fp32 ONNX; mixed does too and pins :data:`FP32_LAYERS` to fp32 (:func:`pin_fp32_layers`; never built on these
machines, which cannot install TensorRT); fp32 clears TF32, so fp32 means fp32. A plan runs only on the TensorRT version that built it and on
GPUs of the compute capability it was built for: both are part of its cache key and recorded beside it
(``artifact.json``), and a deployment on a server whose TensorRT differs is refused
(:func:`tritonsuite.deploy.backends.tensorrt.check_plan_version`).

``tensorrt`` is imported lazily: it is not on PyPI's default index (its libraries come from NVIDIA's), and a host
without it or without CUDA skips ``trt`` cases with that reason.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from tritonsuite.deploy.formats.base import ExportUnsupported, Format

TENSORRT_INSTALL = "pip install tensorrt --extra-index-url https://pypi.nvidia.com"
#: The builder's workspace (scratch GPU memory) limit; 1 GiB, the onnxruntime backend's TensorRT default.
WORKSPACE_BYTES = 1 << 30

Shape = tuple[int, ...]


def tensorrt_version() -> str | None:
    """The installed TensorRT's version, or None when ``tensorrt`` cannot be imported."""
    try:
        import tensorrt
    except Exception:  # ImportError, or an OSError from a wheel whose libraries are missing
        return None
    return str(tensorrt.__version__)


def tensorrt_import_error() -> str | None:
    """Why ``import tensorrt`` fails here (one line), or None."""
    try:
        import tensorrt  # noqa: F401
    except ImportError:
        return f"tensorrt is not installed (NVIDIA's index: {TENSORRT_INSTALL})"
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return f"tensorrt does not import ({first}); reinstall it from NVIDIA's index: {TENSORRT_INSTALL}"
    return None


def compute_capability(device: int = 0) -> str:
    """The CUDA device's compute capability, e.g. "9.0" (H100), "8.0" (A100)."""
    import torch

    major, minor = torch.cuda.get_device_capability(device)
    return f"{major}.{minor}"


def optimization_profile(spec, batch_sizes: tuple[int, ...] | list[int]) -> dict[str, tuple[Shape, Shape, Shape]]:
    """The plan's optimization profile: per input, (min, opt, max) shapes including the batch dimension.

    Batch: min 1 (a dynamic batcher may form any size, an accuracy run sends what is left), opt the largest of
    ``batch_sizes``, max the largest of them (the deployment's max batch size belongs among them: Triton refuses a
    plan whose profile ends below the configuration's ``max_batch_size``). A dynamic (-1) dim: min 1, opt the
    example inputs' size, max the spec's ``max_shape``; a dynamic dim with no ``max_shape`` cannot be built.
    """
    if not batch_sizes or min(batch_sizes) < 1:
        raise ValueError(f"batch sizes {list(batch_sizes)}: a TensorRT optimization profile needs batch sizes >= 1")
    top = max(batch_sizes)
    example = None
    profile = {}
    for t in spec.inputs:
        lo, opt, hi = [1], [top], [top]
        for axis, dim in enumerate(t.shape):
            if dim >= 0:
                lo.append(dim), opt.append(dim), hi.append(dim)
                continue
            if t.max_shape is None:
                raise ExportUnsupported(f"{spec.key} input {t.name} has a dynamic dim {axis + 1} and no max_shape: "
                                        f"a TensorRT optimization profile needs its upper bound")
            if example is None:
                example = spec.example_inputs(1, 0)
            bound = t.max_shape[axis]
            lo.append(1), opt.append(min(int(example[t.name].shape[axis + 1]), bound)), hi.append(bound)
        profile[t.name] = (tuple(lo), tuple(opt), tuple(hi))
    return profile


#: layers a mixed plan pins to fp32: (ILayer type name, operation names of that layer type; () = every one)
FP32_LAYERS = (("NORMALIZATION", ()), ("SOFTMAX", ()), ("REDUCE", ()),
               ("UNARY", ("EXP", "LOG", "SQRT", "RECIP")), ("ELEMENTWISE", ("POW",)))


def pin_fp32_layers(trt, network, config) -> int:
    """Pin the network's :data:`FP32_LAYERS` to fp32 (``layer.precision`` and each floating output's type) and make
    the builder obey it (``OBEY_PRECISION_CONSTRAINTS``, TensorRT 8.2-10's API; the FP16 flag and these constraints
    are deprecated from TensorRT 10.12 for strongly typed networks). Returns how many layers were pinned."""
    classes = {"UNARY": trt.IUnaryLayer, "ELEMENTWISE": trt.IElementWiseLayer}
    operations = {"UNARY": trt.UnaryOperation, "ELEMENTWISE": trt.ElementWiseOperation}
    wanted = {getattr(trt.LayerType, name): (name, ops) for name, ops in FP32_LAYERS}
    pinned = 0
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        if layer.type not in wanted:
            continue
        name, ops = wanted[layer.type]
        if ops:
            layer.__class__ = classes[name]  # TensorRT's Python API: the concrete layer class exposes .op
            if layer.op not in {getattr(operations[name], op) for op in ops}:
                continue
        floating = [j for j in range(layer.num_outputs) if layer.get_output(j).dtype in (trt.float32, trt.float16)]
        if len(floating) != layer.num_outputs:
            continue  # shape or index computations: not numerics to pin
        layer.precision = trt.float32
        for j in floating:
            layer.set_output_type(j, trt.float32)
        pinned += 1
    config.set_flag(trt.BuilderFlag.OBEY_PRECISION_CONSTRAINTS)
    return pinned


def plan_cache_fields(tensorrt: str, capability: str, profile: Mapping[str, tuple[Shape, Shape, Shape]]
                      ) -> dict[str, Any]:
    """What decides a plan besides the ONNX it is built from: TensorRT's version, the GPU's compute capability and
    the optimization profile (part of the cache key; the two strings are also recorded beside the plan)."""
    return {"tensorrt": tensorrt, "compute_capability": capability,
            "optimization_profile": {name: [list(s) for s in shapes] for name, shapes in sorted(profile.items())}}


class TensorRTFormat(Format):
    name, display, source = "trt", "TensorRT", "onnx"

    def unavailable_reason(self, spec, precision: str) -> str | None:
        reason = tensorrt_import_error()
        if reason:
            return reason
        from tritonsuite.core.device import cuda_available

        if not cuda_available():
            return "TensorRT builds and runs plans on a CUDA device; this host has no CUDA device"
        return None

    def source_precision(self, precision: str) -> str:
        return "fp32"  # fp16 is the builder's FP16 flag over the fp32 ONNX, as trtexec --fp16 does; mixed too

    def prepare(self, module, spec, precision: str, device: str):
        return module if precision == "mixed" else super().prepare(module, spec, precision, device)

    def mixed_recipe(self, spec) -> dict:
        return {"fp32_layers": [f"{t}{'.' + '/'.join(ops) if ops else ''}" for t, ops in FP32_LAYERS]}

    def cache_fields(self, spec, precision: str, batch_sizes: tuple[int, ...]) -> dict[str, Any]:
        return plan_cache_fields(tensorrt_version() or "absent", compute_capability(),
                                 optimization_profile(spec, batch_sizes))

    def write(self, module, spec, path: Path, example: tuple, source: Path | None = None,
              batch_sizes: tuple[int, ...] = (), precision: str = "fp32") -> None:
        import tensorrt as trt

        profile = optimization_profile(spec, batch_sizes)
        half = precision in ("fp16", "mixed")
        logger = trt.Logger(trt.Logger.WARNING)
        builder = trt.Builder(logger)
        # TensorRT 10 networks are always explicit-batch (the flag is deprecated there); TensorRT 8 needs it
        flags = 0 if int(trt.__version__.split(".")[0]) >= 10 else \
            1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
        network = builder.create_network(flags)
        parser = trt.OnnxParser(network, logger)
        if not parser.parse_from_file(str(source)):
            errors = [str(parser.get_error(i)).strip() for i in range(parser.num_errors)]
            first = (errors[0].splitlines() or ["no error given"])[0] if errors else "no error given"
            raise ExportUnsupported(f"TensorRT {trt.__version__}'s ONNX parser cannot take {spec.key}: {first}")
        config = builder.create_builder_config()
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, WORKSPACE_BYTES)
        if half:
            config.set_flag(trt.BuilderFlag.FP16)
            if precision == "mixed":
                pin_fp32_layers(trt, network, config)
        else:
            config.clear_flag(trt.BuilderFlag.TF32)  # on by default: fp32 tolerances would not hold
        shapes = builder.create_optimization_profile()
        network_inputs = {network.get_input(i).name for i in range(network.num_inputs)}
        for name, (lo, opt, hi) in profile.items():
            if name in network_inputs:  # the ONNX exporter drops inputs a graph never reads
                shapes.set_shape(name, lo, opt, hi)
        config.add_optimization_profile(shapes)
        plan = builder.build_serialized_network(network, config)
        if plan is None:
            raise RuntimeError(f"TensorRT {trt.__version__} could not build a plan for {spec.key} (its log above "
                               f"says why)")
        path.write_bytes(bytes(plan))
