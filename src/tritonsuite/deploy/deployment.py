"""A deployment as a run serves it: the one run-time record beside its description.

Where it came from (the suite's export and config, or a team's directory as given), where it is served, and what it
declares and runs. Whoever drives it reads this: the run's cases, the configuration search (``tune.runner.TuneTarget``
holds one) and conformance (``judge.conformance.Target.of``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from tritonsuite.core.description import ModelDescription
from tritonsuite.core.spec import ModelSpec
from tritonsuite.deploy.export import Artifact


@dataclass(frozen=True)
class Deployment:
    name: str
    spec: ModelSpec
    artifact: Artifact  # what it serves: the suite's export, or a team's model file as given
    config: Mapping  # its configuration as written (JSON): what the profile produced, or the user's config.pbtxt
    directory: Path
    served_by: str  # the backend that serves it, as the server reports it
    description: ModelDescription  # as the server runs it (tritonsuite.core.description): its driver reads its kind
    declared: ModelDescription  # what its config declares, Triton's defaults where silent: what conformance judges

    @property
    def batched(self) -> bool:  # False: batchless (max_batch_size 0), requests carry no batch dimension
        return self.description.batching

    @property
    def precision(self) -> str:
        return self.artifact.precision
