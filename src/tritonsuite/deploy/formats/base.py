"""The export-format interface (see :mod:`tritonsuite.deploy.formats`)."""
from __future__ import annotations

from pathlib import Path
from typing import Any


class Format:
    name = ""  # what profiles and --formats say
    display = ""  # the report's "Model format" row
    source: str | None = None  # another format's artifact this one is built from, or None (from the eager module)

    def write(self, module, spec, path: Path, example: tuple, source: Path | None = None,
              batch_sizes: tuple[int, ...] = (), precision: str = "fp32") -> None:
        """Write the artifact to ``path``. ``module`` is :meth:`prepare`'s result; ``example`` is a batch of the
        spec's inputs as torch tensors on the export device; ``source`` is the source format's artifact for
        chained formats; ``batch_sizes`` are the batch sizes the deployment will be asked for (its max batch size
        among them), for formats that fix their shapes when built (a TensorRT plan's optimization profile);
        ``precision`` the artifact's (``module`` is already prepared for it). Raise
        :class:`ExportUnsupported` with the reason when this model cannot take this format."""
        raise NotImplementedError

    def prepare(self, module, spec, precision: str, device: str):
        """The module this format writes at ``precision``, and that export verification runs as the artifact's
        eager counterpart; ``module`` is the export's own fp32 copy on ``device``. fp16 is the whole module's
        ``.half()`` (the seeds' recipe); ``mixed`` is each format's own recipe (docs/precision.md)."""
        if precision == "fp16":
            return module.half()
        if precision == "mixed":
            raise ExportUnsupported(f"{self.name} has no mixed-precision recipe")
        return module

    def mixed_recipe(self, spec) -> dict[str, Any]:
        """What decides this format's ``mixed`` artifact besides the model (fp32 module types, blocked ops): part
        of the mixed artifacts' cache key."""
        return {}

    def unavailable_reason(self, spec, precision: str) -> str | None:
        """Why this host cannot build this format (a library or device it lacks), or None. Checked before any
        work, so a case skips with the reason."""
        return None

    def source_precision(self, precision: str) -> str:
        """The precision of the source artifact a chained format is built from (a TensorRT fp16 plan is built from
        the fp32 ONNX with the builder's FP16 flag)."""
        return precision

    def cache_fields(self, spec, precision: str, batch_sizes: tuple[int, ...]) -> dict[str, Any]:
        """What else decides this format's artifact, for the cache key (the builder's version, the GPU, the
        shapes it is built for)."""
        return {}


def compute_dtype(module):
    """The dtype ``module`` computes in: float16 when any floating parameter is half (a mixed module keeps its fp32
    islands' parameters in fp32), else its floating parameters' dtype, else float32."""
    import torch

    dtypes = [p.dtype for p in module.parameters() if p.is_floating_point()]
    return torch.float16 if torch.float16 in dtypes else (dtypes[0] if dtypes else torch.float32)


class ExportUnsupported(Exception):
    """This model cannot be exported to this format/precision here; the message is the skip reason."""


class ExportMismatch(AssertionError):
    """The exported artifact does not reproduce the eager model within tolerance."""
