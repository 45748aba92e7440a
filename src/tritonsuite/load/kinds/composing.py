"""A deployment that calls others: an ensemble's steps (nested ensembles resolved) or a BLS model's callees (as
``--bls-composing-models`` names them). Each composing model's requests, queue and compute per request are read
with the deployment's statistics over the same windows (:func:`tritonsuite.load.windows.snapshot`); perf_analyzer's
own figures of them: :mod:`tritonsuite.load.composing`."""
from __future__ import annotations

from tritonsuite.load.kinds.base import Kind


class Composing(Kind):
    @staticmethod
    def applies(description) -> bool:
        return bool(description.all_composing())

    def composing(self) -> list[str]:
        return [m.name for m in self.description.all_composing()]

    def scheduled(self):
        """An ensemble's scheduler only passes tensors between steps: its steps' schedulers execute (nested
        ensembles resolved). A BLS model executes its own requests."""
        if not self.description.ensemble:
            return None
        return [m for m in self.description.all_composing() if not m.ensemble]

    def loaded_beside(self) -> list[str]:
        return [] if self.description.ensemble else [m.name for m in self.description.composing]

    def unqueued(self) -> str:
        return ("ensemble: its scheduler has no queue; each step's own dynamic batcher queues (check the steps)"
                if self.description.ensemble else "")

    def untunable(self) -> str:
        if not self.description.ensemble:
            return ""
        return (f"is an ensemble: it has no instance group or batcher of its own; tune its composing models "
                f"({', '.join(s.model for s in self.description.steps)})")

    def arguments(self) -> list[str]:
        if self.description.python and self.description.composing:
            return [f"--bls-composing-models={','.join(m.name for m in self.description.composing)}"]
        return []
