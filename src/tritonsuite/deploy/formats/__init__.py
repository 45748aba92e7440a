"""Export formats, one class per format: how an eager module (or another format's artifact) becomes a serving
artifact, its file name and display name. Export caching and verification against eager live in
:mod:`tritonsuite.deploy.export`, shared by every format.

A new format is one more class registered in :data:`FORMATS`. A format built from another format's artifact (a
TensorRT plan from ONNX) names it in ``source``: :func:`tritonsuite.deploy.export.export` exports the source first and hands
its path to :meth:`Format.write`.
"""
from __future__ import annotations

from tritonsuite.deploy.formats.base import Format
from tritonsuite.deploy.formats.onnx import OnnxFormat
from tritonsuite.deploy.formats.tensorrt import TensorRTFormat
from tritonsuite.deploy.formats.torchscript import TorchScriptScript, TorchScriptTrace

FORMATS: dict[str, Format] = {f.name: f for f in (TorchScriptTrace(), TorchScriptScript(), OnnxFormat(),
                                                  TensorRTFormat())}


def get_format(name: str) -> Format:
    if name not in FORMATS:
        raise ValueError(f"unknown format {name!r}; valid choices: {', '.join(FORMATS)}")
    return FORMATS[name]


def spec_formats(spec) -> tuple[str, ...]:
    """The formats a model spec can take: those it declares, and every chained format whose source it declares (a
    model that exports to ONNX can be built into a TensorRT plan; whether TensorRT takes its graph is the build's
    answer)."""
    chained = [name for name, f in FORMATS.items() if f.source in spec.formats and name not in spec.formats]
    return tuple(spec.formats) + tuple(chained)
