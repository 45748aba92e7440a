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
            if device == "cpu":
                # TorchScript's TensorExpr fuser compiles kernels per input shape; on CPU, with shapes that vary
                # (text lengths, frame counts, batch sizes) it recompiled and ran 3-50x slower than eager for
                # FastPitch. Off, as Triton's PyTorch backend allows with ENABLE_TENSOR_FUSER=false.
                torch._C._jit_set_texpr_fuser_enabled(False)
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


def split_request(outputs: dict[str, np.ndarray], start: int, size: int,
                  valid_lengths: dict[str, tuple[str, int]]) -> dict[str, np.ndarray]:
    """One request's slice of a batch's outputs, each padded output trimmed to the request's longest valid length."""
    part = {n: v[start:start + size] for n, v in outputs.items()}
    for name, (length_name, axis) in valid_lengths.items():
        keep = int(np.asarray(part[length_name]).reshape(size, -1)[:, 0].max(initial=0))
        part[name] = part[name][(slice(None),) * (axis + 1) + (slice(0, keep),)]
    return part
