"""Which configuration to ship: a search of a deployment's Triton configuration (instance count, max batch size,
preferred batch sizes, max queue delay, threads per instance) for the most throughput within the profile's latency
bound, with a checked winner.

- :mod:`tritonsuite.profiles.tunespace`: the space, from the profile's ``tune:`` block (defaults around the profile's own
  online configuration) and the budget (``--tune-budget``);
- :mod:`tritonsuite.tune.strategy`: the coordinate search (or the full grid, for comparison), pure;
- :mod:`tritonsuite.tune.runner`: each candidate a stock deployment loaded on the running server and measured with
  the engine; the winner's accuracy (under load, or by its kind's whole exchanges) and its A B A B re-measure
  against the deployment's own configuration;
- :mod:`tritonsuite.run.tunecase`: a case of scenario ``tune`` on the suite: rows recorded as they are measured,
  then ``reports/tune/<deployment>/config.pbtxt`` and the pages (:mod:`tritonsuite.report.tune`).
"""
from __future__ import annotations

from tritonsuite.deploy.repository import write_config  # a configuration (JSON) as a stock config.pbtxt
from tritonsuite.profiles.tunespace import Budget, Candidate, TuneError, TuneSpace, parse_space, space_for
from tritonsuite.tune.strategy import STRATEGIES, Evaluation, run_strategy, winner

__all__ = ["Budget", "Candidate", "Evaluation", "STRATEGIES", "TuneError", "TuneSpace", "parse_space",
           "run_strategy", "space_for", "winner", "write_config"]

