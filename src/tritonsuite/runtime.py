"""Run an exported artifact in-process: the one way the suite executes ONNX and TorchScript files.

Used by export verification, by the python-backend runner inside Triton, and by the self-benchmark, so all three
execute an artifact identically.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

ARTIFACT_FILES = {"onnx": "model.onnx", "ts-trace": "model.pt", "ts-script": "model.pt"}


class ArtifactRunner:
    """Callable over a dict of numpy inputs (batch first) returning a dict of numpy outputs."""

    def __init__(self, path: str | Path, fmt: str, input_names: Sequence[str], output_names: Sequence[str],
                 threads: int | None = None, device: str = "cpu"):
        if fmt not in ARTIFACT_FILES:
            raise ValueError(f"unknown artifact format {fmt!r}; valid choices: {', '.join(ARTIFACT_FILES)}")
        self.fmt, self.device = fmt, device
        self.input_names, self.output_names = list(input_names), list(output_names)
        if fmt == "onnx":
            import onnxruntime as ort

            options = ort.SessionOptions()
            if threads:
                options.intra_op_num_threads = threads
                options.inter_op_num_threads = 1
            providers = ["CUDAExecutionProvider"] if device == "cuda" else ["CPUExecutionProvider"]
            self._session = ort.InferenceSession(str(path), sess_options=options, providers=providers)
            # the ONNX exporter drops inputs the graph never reads (e.g. placeholders of a fixed signature); the
            # serving signature still has them, so they are accepted here and not fed
            self._feeds = [i.name for i in self._session.get_inputs()]
        else:
            import torch

            if threads:
                torch.set_num_threads(threads)
            self._torch = torch
            self._module = torch.jit.load(str(path), map_location=device).eval()

    def __call__(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self.fmt == "onnx":
            outputs = self._session.run(self.output_names, {n: inputs[n] for n in self._feeds})
            return dict(zip(self.output_names, outputs))
        torch = self._torch
        with torch.inference_mode():
            args = [torch.from_numpy(np.ascontiguousarray(inputs[n])).to(self.device) for n in self.input_names]
            outputs = self._module(*args)
        if not isinstance(outputs, (tuple, list)):
            outputs = (outputs,)
        return {n: o.detach().cpu().numpy() for n, o in zip(self.output_names, outputs)}
