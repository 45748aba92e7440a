"""An ensemble's accuracy reference: its steps composed in-process, each composing model run by the session of its
backend (onnxruntime, ``torch.jit.load``: the same sessions the embedded server's stand-ins run), tensors passed
from step to step through the ensemble's ``input_map``/``output_map`` as Triton's ensemble scheduler passes them,
nested ensembles composed the same way.

Steps run in the order their inputs become available (Triton schedules an ensemble by data flow, not by the order
the configuration lists its steps).
"""
from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from tritonsuite.core.description import ModelDescription


class ComposedReference:
    """``desc``'s steps run in-process: batch-first tensors in, the ensemble's outputs out.

    ``session_for(model, version)`` gives a runner (dict in, dict out) of a composing model that is not itself an
    ensemble, at a version (-1: the latest its policy serves), or raises naming why it cannot.
    """

    def __init__(self, desc: ModelDescription, session_for: Callable[[ModelDescription, int], Callable]):
        self.desc = desc
        by_name = {m.name: m for m in desc.composing}
        self.steps = []
        for step in desc.steps:
            model = by_name[step.model]
            runner = (ComposedReference(model, session_for) if model.ensemble else session_for(model, step.version))
            self.steps.append((step, runner))

    def __call__(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        tensors = {k: np.asarray(v) for k, v in inputs.items()}
        pending = list(self.steps)
        while pending:
            ready = [(s, r) for s, r in pending if all(v in tensors for v in s.input_map.values())]
            if not ready:
                missing = sorted({v for s, _ in pending for v in s.input_map.values() if v not in tensors})
                raise ValueError(f"ensemble {self.desc.name}: no step can run; tensors {', '.join(missing)} are "
                                 f"never produced")
            for step, runner in ready:
                out = runner({k: tensors[v] for k, v in step.input_map.items()})
                tensors.update({v: np.asarray(out[k]) for k, v in step.output_map.items()})
                pending.remove((step, runner))
        return {t.name: tensors[t.name] for t in self.desc.outputs}
