"""The python-backend model every embedded deployment runs: executes the exported artifact inside Triton.

Each deployment's ``<version>/model.py`` is one import line pointing here, so all deployments share this runner.
Parameters from ``config.pbtxt``: ``ARTIFACT`` (file name in the version directory), ``FORMAT`` (onnx,
ts-trace, ts-script), ``INTRA_OP_THREADS`` (threads per model instance; 0 = the runtime's default) and, for
models whose outputs are padded within a batch, ``VALID_LENGTHS`` (JSON: output -> [lengths output, per-sample
axis]). The python backend hands a list of requests (several when the dynamic batcher grouped them): they are
concatenated along the batch dimension, run once, and the outputs split back per request; a padded output is
trimmed to the longest valid length within the request, so a result does not depend on what it was batched with.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils

from tritonsuite.runtime import ArtifactRunner, split_request


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        path = Path(args["model_repository"]) / args["model_version"] / params["ARTIFACT"]
        self.input_names = [t["name"] for t in config["input"]]
        self.output_names = [t["name"] for t in config["output"]]
        self.output_dtypes = {t["name"]: pb_utils.triton_string_to_numpy(t["data_type"]) for t in config["output"]}
        device = "cuda" if args.get("model_instance_kind") == "GPU" else "cpu"
        threads = int(params.get("INTRA_OP_THREADS", "0")) or None
        self.runner = ArtifactRunner(path, params["FORMAT"], self.input_names, self.output_names, threads, device)
        self.valid_lengths = {k: tuple(v) for k, v in json.loads(params.get("VALID_LENGTHS", "{}")).items()}

    def execute(self, requests):
        try:
            per_request = [{n: pb_utils.get_input_tensor_by_name(r, n).as_numpy() for n in self.input_names}
                           for r in requests]
            sizes = [len(arrays[self.input_names[0]]) for arrays in per_request]
            if len(per_request) == 1:
                batch = per_request[0]
            else:
                batch = {n: np.concatenate([arrays[n] for arrays in per_request]) for n in self.input_names}
            outputs = self.runner(batch)
        except Exception as exc:  # report to every client instead of killing the stub
            error = pb_utils.TritonError(f"{type(exc).__name__}: {exc}")
            return [pb_utils.InferenceResponse(output_tensors=[], error=error) for _ in requests]
        responses, start = [], 0
        for size in sizes:
            part = split_request(outputs, start, size, self.valid_lengths)
            tensors = [pb_utils.Tensor(n, np.ascontiguousarray(part[n], dtype=self.output_dtypes[n]))
                       for n in self.output_names]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
            start += size
        return responses
