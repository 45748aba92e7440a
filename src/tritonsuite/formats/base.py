"""The export-format interface (see :mod:`tritonsuite.formats`)."""
from __future__ import annotations

from pathlib import Path


class Format:
    name = ""  # what profiles and --formats say
    display = ""  # the report's "Model format" row
    source: str | None = None  # another format's artifact this one is built from, or None (from the eager module)

    def write(self, module, spec, path: Path, example: tuple, source: Path | None = None) -> None:
        """Write the artifact to ``path``. ``example`` is a batch of the spec's inputs as torch tensors on the
        export device; ``source`` is the source format's artifact for chained formats. Raise
        :class:`ExportUnsupported` with the reason when this model cannot take this format."""
        raise NotImplementedError


class ExportUnsupported(Exception):
    """This model cannot be exported to this format/precision here; the message is the skip reason."""


class ExportMismatch(AssertionError):
    """The exported artifact does not reproduce the eager model within tolerance."""
