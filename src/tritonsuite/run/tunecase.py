"""A case of scenario ``tune`` on the suite: the configuration search of a case's online deployment (the profile's,
or a user's deployment as its config.pbtxt declares it, whatever its kind), its rows recorded as they are measured,
the shipped ``reports/tune/<deployment>/config.pbtxt``; the tune pages beside it are the markdown presenter's, written
from the stored rows at the end of the session (:func:`tritonsuite.report.write_reports`)."""
from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path

from tritonsuite.core.settings import LatencyBound
from tritonsuite.load import sources as load_sources
from tritonsuite.load.point import Progress, ProgressLine
from tritonsuite.profiles.tunespace import Budget, Candidate, space_for
from tritonsuite.tune import write_config
from tritonsuite.tune.runner import TuneTarget, tune


def run_tune_case(suite, case, strategy: str = "search", budget: str = "", progress: Progress | None = None):
    """Tune the online deployment of ``case`` on ``suite``'s server within ``budget`` (``--tune-budget``; "": the
    profile's); returns the TuneResult. The shipped configuration goes to
    ``reports/tune/<deployment>/config.pbtxt``; every row is recorded, the answer row last, for the session's pages.
    ``progress`` is told each measured point, counting the configurations measured of the budget's."""
    deployment = suite.deployment(case.model, case.format, case.precision, "online")
    spec = deployment.spec
    identity = {**suite._identity(case), "deployment": deployment.name}
    rows = []

    def record(measurement, name, description, meta):
        shown = replace(deployment, name=name, description=description)  # the parameter table of what was measured
        row = measurement.to_row(**identity, parameters=suite.parameters(shown))
        row.measurement["tune"] = {**meta, "strategy": strategy}
        if meta.get("accuracy_under_load") is not None:
            row.extra["accuracy_under_load"] = meta["accuracy_under_load"]
        suite.record(row)
        rows.append(row)
        if progress is not None:
            labels = list(dict.fromkeys(r.measurement["tune"].get("label") for r in rows
                                        if r.measurement["tune"].get("role") == "evidence"))
            what = (f"configuration {labels.index(meta['label']) + 1}" if meta.get("role") == "evidence"
                    else meta.get("role", ""))
            verdict = f": {'within' if meta['within'] else 'over'}: {meta.get('why', '')}" if "within" in meta else ""
            progress(ProgressLine(f"{what}: {meta.get('label', '')} at concurrency {measurement.point.concurrency}"
                                  f"{verdict}", len(labels), (limit or space.budget).configurations))
        return row

    target = TuneTarget(suite.server, deployment, suite.repository_dir, case.batch_size,
                        load_sources.get("suite", suite.workers)).check()  # why not, in one line
    space = space_for(suite.model_profile(case.model), Candidate.of(deployment.config))  # around its own batcher
    limit = Budget.parse(budget, space.budget) if budget else None
    data = (spec.accuracy_data(suite.datasets.get(case.model), suite.checkpoint(case.model))
            if spec.accuracy_data is not None else None)
    result = tune(target, space, LatencyBound.parse(case.bound), suite.profile.measurement, record,
                  strategy=strategy, budget=limit, accuracy_data=data, probe_share=suite.load_probe_share,
                  probe_seed=suite.load_probe_seed)
    out = Path(suite.reports_dir) / "tune" / deployment.name
    write_config(out / "config.pbtxt", result.shipped.config(deployment.config))
    source = result.best.points[-1] if result.best else (rows[-1] if rows else None)
    answer = copy.deepcopy(source)
    if answer is not None:  # the answer row (the winner's point): the run's summary and the pages read it back
        answer.measurement = {**answer.measurement, "tune": {
            **answer.measurement["tune"], "role": "answer", "answer": result.describe(),
            "recommended": result.recommended, "shipped": result.shipped.to_dict(), "varied": space.varied(),
            "accuracy": result.accuracy_note,
            "configurations": len(result.evaluations), "space": result.space_size,
            "seconds": round(result.seconds, 1)}}
        answer.deployment = deployment.name
        suite.record(answer)
        rows.append(answer)
    return result
