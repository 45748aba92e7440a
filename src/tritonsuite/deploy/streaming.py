"""The streaming example: a model whose output streams in chunks, served as a decoupled deployment beside its own.

A spec's ``stream`` (e.g. FastPitch's ``{"output": "OUTPUT__0", "axis": 2, "size": 32, "length": "OUTPUT__1"}``:
the mel spectrogram in chunks of 32 frames, as a vocoder would consume it) turns a written deployment
``<name>`` into ``<name>_stream``: ``backend: "python"``, ``model_transaction_policy { decoupled: true }``, the
same tensors and batch size, and ``1/model.py`` = :mod:`tritonsuite.deploy.backends.streamer` (a BLS call to
``<name>``, then one response per chunk). Nothing else of the suite goes into it: it loads on any Triton with the
python backend. The load generators drive it over gRPC streams (:mod:`tritonsuite.load.streams`), so its rows carry
time to first response and inter-response latency.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Mapping

STREAMER_FILE = Path(__file__).parent / "backends" / "streamer.py"
STREAM_SUFFIX = "_stream"


def stream_deployment(inner_dir: str | Path, stream: Mapping[str, Any]) -> Path:
    """Write ``<inner>_stream/`` beside the deployment ``inner_dir`` (its config.pbtxt read back) and return it."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2 as mc

    from tritonsuite.deploy.repository import read_config

    inner_dir = Path(inner_dir)
    inner = read_config(inner_dir)
    name = inner_dir.name + STREAM_SUFFIX
    cfg = mc.ModelConfig(name=name, backend="python", max_batch_size=inner.max_batch_size)
    cfg.input.extend(inner.input)
    cfg.output.extend(inner.output)
    cfg.instance_group.add(count=1, kind=mc.ModelInstanceGroup.Kind.Value("KIND_CPU"))
    cfg.model_transaction_policy.decoupled = True
    for key, value in {"INNER_MODEL": inner_dir.name, "CHUNK_OUTPUT": stream["output"],
                       "CHUNK_AXIS": str(stream.get("axis", 1)), "CHUNK_SIZE": str(stream.get("size", 32)),
                       "LENGTH_OUTPUT": stream.get("length", "")}.items():
        cfg.parameters[key].string_value = value
    target = inner_dir.parent / name
    shutil.rmtree(target, ignore_errors=True)
    (target / "1").mkdir(parents=True)
    (target / "config.pbtxt").write_text(text_format.MessageToString(cfg))
    shutil.copy2(STREAMER_FILE, target / "1" / "model.py")
    return target


def chunked_reference(outputs: Mapping[str, Any], stream: Mapping[str, Any]) -> list[dict]:
    """The responses the streamer should send for a request whose whole outputs are ``outputs`` (the accuracy
    reference: the deployment's own unary answer, chunked the same way)."""
    import numpy as np

    whole, axis, size = outputs[stream["output"]], int(stream.get("axis", 1)), int(stream.get("size", 32))
    end = whole.shape[axis]
    if stream.get("length"):
        end = min(end, int(np.max(outputs[stream["length"]])))
    return [{**outputs, stream["output"]: np.take(whole, np.arange(s, min(s + size, end)), axis=axis)}
            for s in range(0, end, size)]
