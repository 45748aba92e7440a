"""ONNX through ``torch.onnx.export`` (TorchScript-based exporter, fixed opset), every batch and -1 dim dynamic."""
from __future__ import annotations

from pathlib import Path

from tritonsuite.deploy.formats.base import Format

ONNX_OPSET = 17


class OnnxFormat(Format):
    name, display = "onnx", "ONNX"

    def write(self, module, spec, path: Path, example: tuple, source: Path | None = None,
              batch_sizes: tuple[int, ...] = ()) -> None:
        import torch

        dynamic_axes = {}
        for t in spec.inputs + spec.outputs:
            dynamic_axes[t.name] = {0: "batch"}
            for axis, dim in enumerate(t.shape, start=1):
                if dim == -1:
                    dynamic_axes[t.name][axis] = f"{t.name}_dim{axis}"
        with torch.inference_mode(False), torch.no_grad():
            torch.onnx.export(module, example, str(path), input_names=[t.name for t in spec.inputs],
                              output_names=[t.name for t in spec.outputs], dynamic_axes=dynamic_axes,
                              opset_version=ONNX_OPSET, dynamo=False)
