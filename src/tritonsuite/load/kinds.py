"""perf_analyzer's options per deployment kind. (The time of the models a deployment calls, an ensemble's steps or
a BLS model's callees, is read with the deployment's statistics in one response per window:
:func:`tritonsuite.load.windows.snapshot`; perf_analyzer's own figures of them: :mod:`tritonsuite.load.composing`.)
"""
from __future__ import annotations


def kind_arguments(description, sequences=None) -> list[str]:
    """perf_analyzer's options for a deployment's kind, the engine's semantics spelled in its names: a sequence
    model's ``--sequence-length``, ``--sequence-length-variation`` and ``--sequence-id-range``; a decoupled model's
    ``--streaming`` (over gRPC, asynchronous); a BLS model's ``--bls-composing-models``."""
    from tritonsuite.load.sequences import SequenceSettings

    found: list[str] = []
    if description is None:
        return found
    if description.sequence:
        s = sequences or SequenceSettings()
        found += ["--sequence-length", str(s.length), "--sequence-length-variation", f"{s.variation_percent:g}",
                  "--sequence-id-range", f"{s.id_start}:{s.id_end}" if s.id_end else str(s.id_start)]
    if description.decoupled:
        found += ["--streaming"]
    if description.composing and description.python:
        found += [f"--bls-composing-models={','.join(m.name for m in description.composing)}"]
    return found
