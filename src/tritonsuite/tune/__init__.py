"""Which configuration to ship: a search of a deployment's Triton configuration (instance count, max batch size,
preferred batch sizes, max queue delay, threads per instance) for the most throughput within the profile's latency
bound, with a checked winner.

- :mod:`tritonsuite.profiles.tunespace`: the space, from the profile's ``tune:`` block (defaults around the profile's own
  online configuration) and the budget (``--tune-budget``);
- :mod:`tritonsuite.tune.strategy`: the coordinate search (or the full grid, for comparison), pure;
- :mod:`tritonsuite.tune.runner`: each candidate a stock deployment loaded on the running server and measured with
  the engine; the winner's accuracy under load and its A B A B re-measure against the profile's configuration;
- :mod:`tritonsuite.run.tunecase`: a case of scenario ``tune`` on the suite: rows recorded as they are measured,
  then ``reports/tune/<deployment>/config.pbtxt`` and the pages (:mod:`tritonsuite.report.tune`).
"""
from __future__ import annotations

from pathlib import Path

from tritonsuite.profiles.tunespace import Budget, Candidate, TuneError, TuneSpace, parse_space, space_for
from tritonsuite.tune.strategy import STRATEGIES, Evaluation, run_strategy, winner

__all__ = ["Budget", "Candidate", "Evaluation", "STRATEGIES", "TuneError", "TuneSpace", "parse_space",
           "run_strategy", "space_for", "winner", "write_config"]


def write_config(path: Path, name: str, spec, artifact, config) -> Path:
    """A stock ``config.pbtxt`` for ``config``, named ``name`` (Triton's model-configuration protobuf)."""
    from google.protobuf import text_format

    from tritonsuite.deploy.backends import backend_for
    from tritonsuite.deploy.repository import model_config

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text_format.MessageToString(model_config(name, spec, backend_for(artifact.format), config)))
    return path
