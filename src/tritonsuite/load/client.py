"""The suite's Triton client: request tensors, system shared-memory regions and served inference, used by the
measurement engine, the accuracy scenario and the tests alike (tritonclient's own protocol code underneath)."""
from __future__ import annotations

import itertools
import os
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import numpy as np

from tritonsuite.core.spec import ModelSpec, TensorSpec
from tritonsuite.server.shm import CLIENT_SHM_PREFIX

if TYPE_CHECKING:
    from tritonsuite.server import TritonServer

_region_counter = itertools.count(1)


class ClientError(ValueError):
    """A request the server refused or answered wrongly; the message says which."""


PROTOCOLS = ("http", "grpc")


def batch_first(tensors: Mapping[str, np.ndarray], batched: bool) -> dict[str, np.ndarray]:
    """``tensors`` as the suite holds every request and answer: batch first. A batchless deployment's
    (``batched`` false, ``max_batch_size: 0``: on the wire its configuration's dims alone) become a batch of one;
    a batching deployment's already are batch first. The inverse of :func:`as_sent`."""
    if batched:
        return dict(tensors)
    return {name: np.asarray(array)[None] for name, array in tensors.items()}


def as_sent(tensors: Mapping[str, np.ndarray], batched: bool) -> dict[str, np.ndarray]:
    """``tensors`` (batch first) as the wire carries them for the deployment: a batching deployment's as they are;
    a batchless deployment's batch of one without its batch dimension, as its configuration's dims declare it
    (``ClientError`` for any other batch). The inverse of :func:`batch_first`."""
    if batched:
        return dict(tensors)
    if any(len(a) != 1 for a in tensors.values()):
        raise ClientError(f"a batchless deployment (max_batch_size 0) takes one sample per request; got "
                          f"{sorted({len(a) for a in tensors.values()})}")
    return {name: array[0] for name, array in tensors.items()}


def infer_tensors(inputs: Mapping[str, np.ndarray], outputs: Sequence[str], shm: "SharedMemoryRegions | None" = None,
                  protocol: str = "http", batched: bool = True,
                  class_counts: Mapping[str, int] | None = None):
    """tritonclient input and requested-output objects (HTTP's, or gRPC's) for one request: tensors in the request
    body, or, with ``shm``, references into its registered regions. The one place the suite builds them.

    ``inputs`` are batch first; a batchless deployment's (``batched`` false, ``max_batch_size: 0``) is a batch of
    one sent without its batch dimension, as the configuration's dims declare it (:func:`as_sent`).
    ``class_counts``: {output: count} for outputs asked for as the classification extension's top classes
    (``score:index[:label]`` strings); only those, never every output (a BYTES one among them kills tritonserver
    2.51 with a divide error)."""
    import importlib

    from tritonclient.utils import np_to_triton_dtype

    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol {protocol!r}; valid choices: {', '.join(PROTOCOLS)}")
    httpclient = importlib.import_module(f"tritonclient.{protocol}")
    binary = {"binary_data": True} if protocol == "http" else {}

    infer_inputs, infer_outputs = [], []
    for name, array in as_sent(inputs, batched).items():
        tensor = httpclient.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
        if shm is not None:
            tensor.set_shared_memory(shm.input_name, array.nbytes, offset=shm.input_offsets[name])
        else:
            tensor.set_data_from_numpy(np.ascontiguousarray(array), **binary)
        infer_inputs.append(tensor)
    for name in outputs:
        requested = httpclient.InferRequestedOutput(name, class_count=(class_counts or {}).get(name, 0), **binary)
        if shm is not None:
            requested.set_shared_memory(shm.output_name, shm.output_sizes[name], offset=shm.output_offsets[name])
        infer_outputs.append(requested)
    return infer_inputs, infer_outputs


class SharedMemoryRegions:
    """System shared-memory regions for one point's inputs and outputs, registered with the server.

    Created, registered, unregistered and destroyed within the point, so no region outlives it.
    """

    def __init__(self, server: TritonServer, inputs: Mapping[str, np.ndarray], output_specs: Sequence[TensorSpec],
                 batch_size: int):
        n = next(_region_counter)
        self.server = server
        self.input_name = f"{CLIENT_SHM_PREFIX}{os.getpid()}x{n}_in"
        self.output_name = f"{CLIENT_SHM_PREFIX}{os.getpid()}x{n}_out"
        self.input_offsets, offset = {}, 0
        for name, array in inputs.items():
            self.input_offsets[name] = offset
            offset += array.nbytes
        self.input_size = offset
        self.output_offsets, self.output_sizes, offset = {}, {}, 0
        for t in output_specs:  # sized up front: a dynamic dim needs the output's max_shape to bound it
            if any(d < 0 for d in t.shape) and t.max_shape is None:
                raise ClientError(f"output {t.name} has a dynamic shape {t.shape} and no max_shape: "
                                       f"shared-memory output needs an upper bound")
            self.output_offsets[t.name] = offset
            self.output_sizes[t.name] = t.max_elements() * batch_size * t.numpy_dtype.itemsize
            offset += self.output_sizes[t.name]
        self.output_size = offset
        self._inputs = inputs
        self._handles: list = []
        self._registered: list[str] = []

    def __enter__(self):
        import tritonclient.utils.shared_memory as shm

        try:
            handle = shm.create_shared_memory_region(self.input_name, "/" + self.input_name, self.input_size)
            self._handles.append(handle)
            shm.set_shared_memory_region(handle, [np.ascontiguousarray(a) for a in self._inputs.values()])
            self._handles.append(shm.create_shared_memory_region(self.output_name, "/" + self.output_name,
                                                                 self.output_size))
            client = self.server.client()
            try:
                for name, size in ((self.input_name, self.input_size), (self.output_name, self.output_size)):
                    client.register_system_shared_memory(name, "/" + name, size)
                    self._registered.append(name)
            finally:
                client.close()
        except BaseException:
            self.__exit__()
            raise
        return self

    def read_output(self, name: str, shape: tuple[int, ...], dtype: str) -> np.ndarray:
        """An output as Triton wrote it: ``shape`` is the one the response returned (for a dynamic output, at most
        the region's bound)."""
        import tritonclient.utils.shared_memory as shm

        return shm.get_contents_as_numpy(self._handles[1], np.dtype(dtype), shape, offset=self.output_offsets[name])

    def __exit__(self, *exc):
        import tritonclient.utils.shared_memory as shm

        if self._registered:
            try:
                client = self.server.client(timeout=10)
                try:
                    for name in self._registered:
                        client.unregister_system_shared_memory(name)
                finally:
                    client.close()
            except Exception:
                pass  # the server is gone: its registrations went with it
            self._registered.clear()
        for handle in self._handles:
            shm.destroy_shared_memory_region(handle)
        self._handles.clear()




def served_infer(client, model_name: str, spec: ModelSpec, *, batched: bool,
                 timeout_s: float | None = None) -> Callable[[dict], dict]:
    """A dict-in/dict-out callable that runs one batch through Triton over the client's protocol (HTTP or gRPC); a
    request unanswered within the HTTP client's timeout or ``timeout_s`` (gRPC) raises Hang.
    ``model_name`` may name a version (``name:version``). ``batched`` (required: the deployment's
    ``max_batch_size > 0``, as the configuration Triton serves says): a batchless deployment's batch of one is sent
    without its batch dimension and its outputs come back with one added, like every other's."""
    from tritonsuite.core.description import model_and_version
    from tritonsuite.load.point import Hang

    names = [t.name for t in spec.outputs]
    protocol = "grpc" if type(client).__module__.startswith("tritonclient.grpc") else "http"
    name, version = model_and_version(model_name)

    def infer(inputs):
        tensors, requested = infer_tensors({t.name: inputs[t.name] for t in spec.inputs}, names, protocol=protocol,
                                           batched=batched)
        try:
            result = client.infer(name, tensors, model_version=version, outputs=requested,
                                  **({"client_timeout": timeout_s} if protocol == "grpc" and timeout_s else {}))
        except Exception as exc:  # the HTTP client's own timeout; gRPC's deadline
            if isinstance(exc, TimeoutError) or "deadline exceeded" in str(exc).lower():
                bound = f"{timeout_s:.0f} s" if timeout_s else "the client's timeout"
                raise Hang(f"no response within {bound} from {model_name} ({exc})") from None
            raise
        return batch_first({n: result.as_numpy(n) for n in names}, batched)

    return infer
