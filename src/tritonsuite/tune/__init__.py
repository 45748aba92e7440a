"""Which configuration to ship: a search of a deployment's Triton configuration (instance count, max batch size,
preferred batch sizes, max queue delay, threads per instance) for the most throughput within the profile's latency
bound, with a checked winner.

- :mod:`tritonsuite.tune.space`: the space, from the profile's ``tune:`` block (defaults around the profile's own
  online configuration) and the budget (``--tune-budget``);
- :mod:`tritonsuite.tune.strategy`: the coordinate search (or the full grid, for comparison), pure;
- :mod:`tritonsuite.tune.runner`: each candidate a stock deployment loaded on the running server and measured with
  the engine; the winner's accuracy under load and its A B A B re-measure against the profile's configuration;
- :func:`run_tune_case`: a :class:`~tritonsuite.suite.Suite` case of scenario ``tune``: rows recorded as they are
  measured (scenario ``tune``), then ``reports/tune/<deployment>/config.pbtxt`` and the pages
  (:mod:`tritonsuite.report.tune`).
"""
from __future__ import annotations

from pathlib import Path

from tritonsuite.tune.space import Budget, Candidate, TuneError, TuneSpace, parse_space, space_for
from tritonsuite.tune.strategy import STRATEGIES, Evaluation, run_strategy, winner

__all__ = ["Budget", "Candidate", "Evaluation", "STRATEGIES", "TuneError", "TuneSpace", "parse_space",
           "run_strategy", "run_tune_case", "space_for", "winner", "write_config"]


def write_config(path: Path, name: str, spec, artifact, config) -> Path:
    """A stock ``config.pbtxt`` for ``config``, named ``name`` (Triton's model-configuration protobuf)."""
    from google.protobuf import text_format

    from tritonsuite.deploy.backends import backend_for
    from tritonsuite.deploy.repository import model_config

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text_format.MessageToString(model_config(name, spec, backend_for(artifact.format), config)))
    return path


def run_tune_case(suite, case, strategy: str = "search", budget: Budget | None = None):
    """Tune the online deployment of ``case`` on ``suite``'s server; returns the TuneResult. The shipped
    configuration goes to ``reports/tune/<deployment>/config.pbtxt``, the evidence and summary pages beside it."""
    import copy
    from dataclasses import replace

    from tritonsuite.report.tune import write_tune_pages
    from tritonsuite.settings import LatencyBound
    from tritonsuite.tune.runner import TuneTarget, tune

    deployment = suite.deployment(case.model, case.format, case.precision, "online")
    spec = deployment.spec
    identity = {**suite._identity(case), "deployment": deployment.name}
    rows = []

    def record(measurement, name, config, meta):
        shown = replace(deployment, name=name, config=config)  # the parameter table of what was measured
        row = measurement.to_row(**identity, parameters=suite.parameters(shown))
        row.measurement["tune"] = {**meta, "strategy": strategy}
        if meta.get("accuracy_under_load") is not None:
            row.extra["accuracy_under_load"] = meta["accuracy_under_load"]
        suite.record(row)
        rows.append(row)
        return row

    mp = suite.model_profile(case.model)
    space = space_for(mp)
    data = (spec.accuracy_data(suite.datasets.get(case.model), suite.checkpoint(case.model))
            if spec.accuracy_data is not None else None)
    target = TuneTarget(suite.server, deployment.name, spec, deployment.artifact, deployment.config,
                        suite.repository_dir, case.precision, case.batch_size)
    result = tune(target, space, LatencyBound.parse(case.bound), suite.profile.measurement, record,
                  strategy=strategy, budget=budget, accuracy_data=data, probe_share=suite.load_probe_share,
                  probe_seed=suite.load_probe_seed)
    out = Path(suite.reports_dir) / "tune" / deployment.name
    write_config(out / "config.pbtxt", deployment.name, spec, deployment.artifact,
                 result.shipped.config(deployment.config))
    source = result.best.points[-1] if result.best else (rows[-1] if rows else None)
    answer = copy.deepcopy(source)
    if answer is not None:  # the answer row (the winner's point): the run's summary and the pages read it back
        answer.measurement = {**answer.measurement, "tune": {
            **answer.measurement["tune"], "role": "answer", "answer": result.describe(),
            "recommended": result.recommended, "shipped": result.shipped.to_dict(),
            "configurations": len(result.evaluations), "space": result.space_size,
            "seconds": round(result.seconds, 1)}}
        answer.deployment = deployment.name
        suite.record(answer)
        rows.append(answer)
    write_tune_pages(suite.reports_dir, rows)
    return result
