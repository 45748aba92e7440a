"""The presenter seam: each presenter is one module of this package with a ``NAME`` and a ``write(run) -> list of
paths`` that takes a :class:`tritonsuite.report.records.RunRecords` (the run read and grouped once) and writes its
pages under ``run.reports_dir``. :func:`tritonsuite.report.write_reports` runs the ones asked for, in order; a new
presenter is a new module and a line in :data:`PRESENTERS`."""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Protocol

from tritonsuite.report.records import RunRecords

#: presenter name -> its module
PRESENTERS = {"markdown": "tritonsuite.report.presenters.markdown", "html": "tritonsuite.report.presenters.html"}


class Presenter(Protocol):
    NAME: str

    def write(self, run: RunRecords) -> list[Path]:
        """Write this presenter's pages of ``run``; return every path written."""


def presenter(name: str) -> Presenter:
    if name not in PRESENTERS:
        raise ValueError(f"presenter {name!r}; valid choices: {', '.join(PRESENTERS)}")
    return importlib.import_module(PRESENTERS[name])  # type: ignore[return-value]
