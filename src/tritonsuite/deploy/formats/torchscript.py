"""TorchScript by tracing (``ts-trace``, the seeds' usual format) and by scripting (``ts-script``).

pytorch_backend binds configured inputs to ``forward`` arguments by name, else by the ``<name>__<index>``
convention, else in config order, and outputs by the convention, else in config order. The export wraps the
model in a generated module whose ``forward`` takes arguments and returns results exactly as the backend will
bind them (:func:`tritonsuite.deploy.backends.torchscript_signature`), so any spec's tensor names serve correctly.
"""
from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path

import numpy as np

from tritonsuite.deploy.formats.base import ExportUnsupported, Format, compute_dtype


def _signature_wrapper(module, spec, example: tuple, directory: Path):
    """``module`` behind a generated ``forward`` whose arguments and results are ordered for pytorch_backend.

    The wrapper's source is written to a file in ``directory`` and imported from there, because
    ``torch.jit.script`` compiles from source: keep the directory until the export is written.
    """
    import torch

    from tritonsuite.deploy.backends import torchscript_signature

    arguments, argument_inputs, result_outputs = torchscript_signature([t.name for t in spec.inputs],
                                                                       [t.name for t in spec.outputs])
    # A reduced-precision module (fp16) takes and gives the dtypes the configuration declares, as a stock
    # pytorch_backend requires: floating inputs are cast to the module's dtype, floating outputs back.
    compute = compute_dtype(module)
    inputs_compute = torch.float32 if getattr(module, "takes_declared_dtypes", False) else compute
    names = [arguments[argument_inputs.index(j)] for j in range(len(spec.inputs))]
    call = ", ".join(f"{n}.to(torch.{str(compute).split('.')[1]})" if inputs_compute != torch.float32
                     and np.dtype(t.dtype).kind == "f" else n for n, t in zip(names, spec.inputs))
    with torch.no_grad():
        produced = module(*_module_inputs(example, spec, inputs_compute))
    returns_tuple = isinstance(produced, (tuple, list))

    def result(k: int) -> str:
        value = f"outputs[{k}]" if returns_tuple else "outputs"
        declared = np.dtype(spec.outputs[k].dtype)
        return f"{value}.to(torch.{declared.name})" if compute != torch.float32 and declared.kind == "f" else value

    results = ", ".join(result(k) for k in (result_outputs if returns_tuple else [0]))
    path = directory / "tritonsuite_signature.py"
    path.write_text(
        "import torch\n\n\n"
        "class Signature(torch.nn.Module):\n"
        "    def __init__(self, inner):\n"
        "        super().__init__()\n"
        "        self.inner = inner\n\n"
        f"    def forward(self, {', '.join(arguments)}):\n"
        f"        outputs = self.inner({call})\n"
        f"        return ({results},)\n")
    loader = importlib.util.spec_from_file_location("tritonsuite_signature", path)
    generated = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(generated)
    # the wrapper takes its arguments in the backend's order: so does the example it is traced with
    return generated.Signature(module).eval(), tuple(example[j] for j in argument_inputs)


def _module_inputs(arguments: tuple, spec, compute) -> tuple:
    """``arguments`` (the spec's dtypes, spec order) as ``module`` takes them: floating ones in its dtype."""
    return tuple(a.to(compute) if a.is_floating_point() else a for a in arguments)


class _TorchScript(Format):
    def mixed_recipe(self, spec) -> dict:
        return {"fp32_modules": list(spec.fp32_modules)}

    def write(self, module, spec, path: Path, example: tuple, source: Path | None = None,
              batch_sizes: tuple[int, ...] = (), precision: str = "fp32") -> None:
        import torch

        with tempfile.TemporaryDirectory(prefix="tritonsuite-signature-") as tmp, \
                torch.inference_mode(False), torch.no_grad():
            try:
                wrapper, arguments = _signature_wrapper(module, spec, example, Path(tmp))
            except RuntimeError as exc:
                if precision != "mixed":
                    raise
                # measured: TFT's LSTM under CPU autocast goes to oneDNN's fp16 LSTM, which refuses ("could not
                # create a primitive descriptor for the LSTM forward propagation primitive")
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise ExportUnsupported(f"{spec.key} does not run under its mixed recipe on "
                                        f"{example[0].device.type}: {first}") from None
            torch.jit.save(self._compile(wrapper, arguments, spec), str(path))

    def _compile(self, wrapper, arguments: tuple, spec):
        raise NotImplementedError


class TorchScriptTrace(_TorchScript):
    name, display = "ts-trace", "TorchScript Trace"

    def prepare(self, module, spec, precision: str, device: str):
        """mixed: the fp32 module under ``torch.autocast(<export device>, float16, cache_enabled=False)``, with the
        spec's fp32 module types as islands (CPU autocast keeps none of them in fp32), traced on the device it will
        serve on: the casts are recorded in the graph."""
        if precision != "mixed":
            return super().prepare(module, spec, precision, device)
        import torch

        from tritonsuite.deploy.formats.mixed import autocast_module, keep_fp32

        if device.startswith("cpu") and any(isinstance(m, torch.nn.RNNBase) for m in module.modules()):
            # measured: CPU autocast sends an LSTM to oneDNN's fp16 LSTM, which a CPU without AVX512-FP16 refuses
            # ("could not create a primitive descriptor for the LSTM forward propagation primitive") and one with it
            # (Sapphire Rapids) traces into a graph that then multiplies float by half: one verdict on every host
            raise ExportUnsupported(f"{spec.key} as ts-trace mixed on the CPU: autocast's fp16 LSTM is oneDNN's, "
                                    f"refused or mis-traced depending on the CPU (use ts-script or onnx)")
        keep_fp32(module, tuple(spec.fp32_modules))
        return autocast_module(module, spec, device.split(":")[0])

    def _compile(self, wrapper, arguments: tuple, spec):
        import torch

        return torch.jit.trace(wrapper, arguments, check_trace=False)


class TorchScriptScript(_TorchScript):
    name, display = "ts-script", "TorchScript Script"

    def prepare(self, module, spec, precision: str, device: str):
        """mixed: scripting records no autocast, so the module's ``.half()`` with the spec's fp32 module types as
        explicit fp32 islands; refused (a skip with the reason) when the model has none of them."""
        if precision != "mixed":
            return super().prepare(module, spec, precision, device)
        from tritonsuite.deploy.formats.mixed import half_with_fp32_islands

        return half_with_fp32_islands(module, spec)

    def _compile(self, wrapper, arguments: tuple, spec):
        import torch

        try:
            return torch.jit.script(wrapper)
        except Exception as exc:  # torch raises many types here; the first line is the reason
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ExportUnsupported(f"torch.jit.script cannot compile {spec.key}: {reason}") from None
