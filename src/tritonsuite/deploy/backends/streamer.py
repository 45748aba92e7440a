"""A decoupled python-backend model that streams another model's output in chunks (the suite's streaming example):
copied unchanged as ``1/model.py`` of a ``<deployment>_stream`` deployment by :mod:`tritonsuite.deploy.streaming`.

Each request is passed on (BLS) to the model its configuration's ``INNER_MODEL`` parameter names, which returns its
outputs at once; ``CHUNK_OUTPUT`` is then cut along axis ``CHUNK_AXIS`` (batch included) into chunks of
``CHUNK_SIZE``, up to the longest valid length in the batch (``LENGTH_OUTPUT``, when named), and each chunk is sent
as one response carrying it and the other outputs unchanged; the final flag follows alone. A vocoder consuming mel
frames as they come, or a token stream, looks like this from the client. It imports nothing of tritonsuite, so any
Triton with the python backend serves it.
"""
import json

import numpy as np


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        self.inner = params["INNER_MODEL"]
        self.chunked = params["CHUNK_OUTPUT"]
        self.axis = int(params["CHUNK_AXIS"])
        self.size = int(params["CHUNK_SIZE"])
        self.length = params.get("LENGTH_OUTPUT", "")
        self.outputs = [o["name"] for o in config["output"]]

    def execute(self, requests):
        import triton_python_backend_utils as pb_utils  # the stub's module: inside, so the suite imports this file

        for request in requests:
            sender = request.get_response_sender()
            try:
                inner = pb_utils.InferenceRequest(model_name=self.inner, requested_output_names=self.outputs,
                                                  inputs=request.inputs()).exec()
                if inner.has_error():
                    raise pb_utils.TritonModelException(inner.error().message())
                found = {n: pb_utils.get_output_tensor_by_name(inner, n).as_numpy() for n in self.outputs}
                whole = found[self.chunked]
                end = whole.shape[self.axis]
                if self.length:
                    end = min(end, int(np.max(found[self.length])))
                for start in range(0, end, self.size):
                    part = np.take(whole, np.arange(start, min(start + self.size, end)), axis=self.axis)
                    sender.send(pb_utils.InferenceResponse(
                        [pb_utils.Tensor(n, np.ascontiguousarray(part) if n == self.chunked else found[n])
                         for n in self.outputs]))
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            except Exception as exc:  # noqa: BLE001 - the client gets the error as the request's final response
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc))),
                            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
