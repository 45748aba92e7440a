"""The accuracy scenario run by the suite (``pytest -m accuracy``, :meth:`tritonsuite.run.suite.Suite.run_accuracy`): a
deployment's accuracy data through Triton at its max batch size, judged against the eager reference
(:func:`tritonsuite.judge.accuracy.evaluate`), then against its committed baseline
(:mod:`tritonsuite.judge.baselines`), with the weights and data it ran on named and hashed, and the row recorded. A
sequence model, a decoupled one or a python model is judged by its kind instead (:mod:`tritonsuite.judge.responses`:
whole sequences, whole response streams, validation_data)."""
from __future__ import annotations

from tritonsuite.core.rows import Row
from tritonsuite.core.spec import path_digest
from tritonsuite.deploy import export as export_mod
from tritonsuite.judge import responses as kinds
from tritonsuite.judge.accuracy import AccuracyResult, evaluate
from tritonsuite.judge.baselines import provenance
from tritonsuite.load.client import served_infer
from tritonsuite.run.cases import Case
from tritonsuite.run.deploysources import source_of
from tritonsuite.core.reasons import reason

#: names this module writes failure reasons to, beside ``problems`` and ``reason`` (tritonsuite.core.reasons)
REASON_NAMES = ("failures",)


#: every failure reason this module gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("{} (--require-baselines)", "test_user_model.py::test_the_accuracy_gate_against_committed_baselines"),
    reason("regressed against its baseline: {} ({})",
           "test_user_model.py::test_the_accuracy_gate_against_committed_baselines"),
)


def run_accuracy_case(suite, case: Case) -> AccuracyResult:
    """Run the model's accuracy data through Triton at the max batch size and judge it against eager."""
    deployment = None
    try:
        deployment = suite.deployment(case.model, case.format, case.precision, "accuracy")
        spec = deployment.spec
        if spec.accuracy_data is None:
            raise export_mod.ExportUnsupported(f"{spec.key} defines no accuracy task")
        data = spec.accuracy_data(suite.datasets.get(case.model), suite.checkpoint(case.model))
        if kinds.judged_by_kind(deployment.description, spec):  # sequences, streams, python models
            return record_accuracy(suite, case, deployment, data, kinds.kind_accuracy(
                suite.server, deployment.description, spec, case.precision, data, suite.protocol))
        reference = source_of(spec).reference(suite, case.model, spec)
        client = suite.server.grpc_client() if suite.protocol == "grpc" else suite.server.client()
        try:
            result = evaluate(spec, deployment.name, case.precision, data,
                              served_infer(client, deployment.name, spec, batched=deployment.batched,
                                           timeout_s=suite.server.request_timeout_s), reference,
                              max(deployment.description.max_batch_size, 1))
        except Exception:
            if suite.server.gone():
                raise suite.server.died(f"during the accuracy run of {deployment.name}") from None
            raise
        finally:
            client.close()
    except export_mod.ExportUnsupported:
        raise
    except Exception as exc:
        if deployment is not None:
            suite.broke(exc)
        suite._record_failure(case, exc, deployment)
        raise
    return record_accuracy(suite, case, deployment, data, result)


def record_accuracy(suite, case: Case, deployment, data, result: AccuracyResult) -> AccuracyResult:
    """The accuracy row: the weights and data named and hashed, judged against its baseline, recorded."""
    spec = deployment.spec
    row = result.to_row(**suite._identity(case), parameters=suite.parameters(deployment))
    weights = suite.weights(case.model)  # which weights, and their and the data's sha256: what a baseline records
    known = {"weights": weights, "dataset_sha256": data.data_sha256 or path_digest(suite.datasets.get(case.model))
             or "", "weights_sha256": source_of(spec).weights_sha256(suite, case.model, spec)}
    row.extra.update(known)
    if suite.baselines is not None:
        row = against_baseline(suite, case, result, row)
        row.extra.update(known)
    row.description += f"; weights: {weights}"  # the report's accuracy line says which
    if weights == "seeded random":
        row.description += " (the verdict is agreement with eager, not a trained model's)"
    row.extra["reference"] = kinds.reference_name(deployment.description, deployment.spec)
    suite.record(row)
    return result


def against_baseline(suite, case: Case, result: AccuracyResult, row: Row) -> Row:
    """Compare with the deployment's stored baseline: a regression beyond its allowance is a failure naming
    the metric, baseline, now, delta and allowance; or, under ``update_baselines``, store this run's metrics
    when the absolute checks passed."""
    row.run_id = suite.run_id
    comparison = suite.baselines.compare(row)
    note = comparison.to_dict()
    if suite.update_baselines:
        if result.passed:
            note["updated"] = str(suite.baselines.update(row, provenance(row, suite.server.version())))
    else:
        if (comparison.missing or comparison.refused) and suite.require_baselines:
            result.failures.append(f"{comparison.missing or comparison.refused} (--require-baselines)")
        result.failures += [f"regressed against its baseline: {v.describe()} ({comparison.file})"
                            for v in comparison.regressions]
    row = result.to_row(**suite._identity(case), parameters=row.parameters)
    row.extra["baseline"] = note
    return row
