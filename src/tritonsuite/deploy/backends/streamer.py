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
import os

import numpy as np

#: a python-backend stub built against numpy 1 (nvidia-pytriton's) hands numpy 2 arrays over empty; DLPack, through
#: torch as the stand-ins do, does not pass through numpy's C interface. TRITONSUITE_BY_DLPACK=1 takes that path
#: under numpy 1 too (the stand-ins' switch)
BY_DLPACK = int(np.__version__.split(".")[0]) >= 2 or \
    os.environ.get("TRITONSUITE_BY_DLPACK", "").lower() in ("1", "true", "yes", "on")


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
        self.bytes = {o["name"] for o in config["output"] if o["data_type"] == "TYPE_STRING"}

    def execute(self, requests):
        import triton_python_backend_utils as pb_utils  # the stub's module: inside, so the suite imports this file

        for request in requests:
            sender = request.get_response_sender()
            try:
                inner = pb_utils.InferenceRequest(model_name=self.inner, requested_output_names=self.outputs,
                                                  inputs=request.inputs()).exec()
                if inner.has_error():
                    raise pb_utils.TritonModelException(inner.error().message())
                found = {n: _array(pb_utils.get_output_tensor_by_name(inner, n), n in self.bytes)
                         for n in self.outputs}
                whole = found[self.chunked]
                end = whole.shape[self.axis]
                if self.length:
                    end = min(end, int(np.max(found[self.length])))
                for start in range(0, end, self.size):
                    part = np.take(whole, np.arange(start, min(start + self.size, end)), axis=self.axis)
                    sender.send(pb_utils.InferenceResponse(
                        [_tensor(pb_utils, n, part if n == self.chunked else found[n]) for n in self.outputs]))
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            except Exception as exc:  # noqa: BLE001 - the client gets the error as the request's final response
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc))),
                            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None


def _array(tensor, is_bytes):
    if not BY_DLPACK or is_bytes:
        return tensor.as_numpy()
    import torch.utils.dlpack  # by DLPack through torch, as the stand-ins do (numpy 2 hosts have it)

    return torch.utils.dlpack.from_dlpack(tensor.to_dlpack()).cpu().numpy()


def _tensor(pb_utils, name, array):
    if not BY_DLPACK or array.dtype == np.object_:
        return pb_utils.Tensor(name, np.ascontiguousarray(array))
    import torch
    import torch.utils.dlpack

    return pb_utils.Tensor.from_dlpack(name, torch.utils.dlpack.to_dlpack(torch.from_numpy(np.array(array))))
