"""Check 1, identity: the server serves what the repository's config.pbtxt declares, in the versions its policy
selects, and each of those versions answers with the declared outputs (sent as the deployment's driver sends a
request: a sequence model's as a sequence of one, a decoupled model's on a gRPC stream)."""
from __future__ import annotations

from tritonsuite.judge.conformance.result import CheckResult, Target
from tritonsuite.judge.conformance.traffic import ask, fits_dims, responses
from tritonsuite.core.reasons import reason


#: every failure reason this check gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("{}: declared {}, served {}",
           "unit/test_judge_identity.py::test_a_configuration_served_otherwise_fails_naming_each_field"),
    reason("metadata has no input {}",
           "unit/test_judge_identity.py::test_metadata_without_a_declared_input_fails"),
    reason("metadata: input {} shape {}, declared {}",
           "unit/test_judge_identity.py::test_metadata_of_another_shape_fails"),
    reason("READY versions {}, but version policy {} selects {} of the version directories {}",
           "unit/test_judge_identity.py::test_ready_versions_other_than_the_policy_selects_fail",
           "test_conformance_checks.py::test_identity_catches_a_version_policy_serving_the_wrong_version"),
    reason("version {} did not answer a request of the declared inputs ({})",
           "unit/test_judge_identity.py::test_a_version_that_refuses_the_declared_request_fails"),
    reason("version {} answered outputs unlike the declared ones: {}",
           "unit/test_judge_identity.py::test_outputs_unlike_the_declared_ones_fail"),
    reason("a request for version {} was answered by version {}",
           "unit/test_judge_identity.py::test_a_request_answered_by_another_version_fails"),
)


def _tensors(tensors) -> str:
    return ", ".join(f"{t.name} {t.dtype} {list(t.shape)}" for t in tensors)


def _signature(d) -> dict[str, str]:
    return {"platform/backend": d.platform or d.backend, "max_batch_size": str(d.max_batch_size),
            "scheduler": d.scheduler,
            "inputs": _tensors(d.inputs), "outputs": _tensors(d.outputs)}


def _versions_on_disk(target: Target) -> list[int]:
    return sorted(int(p.name) for p in target.directory.iterdir() if p.is_dir() and p.name.isdigit())


def _served_versions(metadata: dict) -> list[int]:
    """The versions the server serves, from the model's own metadata (``versions``: its READY versions). Not the
    repository index: it lists the server's own repository only, and a model uploaded with the load request (a
    remote server with an empty repository) is in none."""
    return sorted(int(v) for v in metadata.get("versions", ()) if str(v).isdigit())


def check_identity(target: Target) -> CheckResult:
    declared = target.description
    served = target.server.model_description(target.name)  # an ensemble's steps looked up on the server
    conn = target.server.client(timeout=30)
    try:
        metadata = conn.get_model_metadata(target.name)
    finally:
        conn.close()
    request = target.request(1)
    # one request to each READY version, as the deployment's driver sends it (a sequence model's as a sequence of
    # one, a decoupled model's on a stream)
    answers = {version: ask(target, request, version) for version in _served_versions(metadata)}
    return judge_identity(target.name, declared, served, metadata, _versions_on_disk(target), answers)


def judge_identity(name: str, declared, served, metadata: dict, on_disk: list[int], answers: dict) -> CheckResult:
    """The verdict from what was observed: the configuration the server completed (``served``), the model's
    metadata, the version directories on disk and each READY version's answer (``answers``: version -> Answer)."""
    want, got = _signature(declared), _signature(served)
    if (not declared.platform or not served.platform) and declared.backend == served.backend:
        got["platform/backend"] = want["platform/backend"]  # a platform and the backend it maps to: the same thing
    problems = [f"{k}: declared {want[k]}, served {got[k]}" for k in want if want[k] != got[k]]
    meta_inputs = {t["name"]: (t["datatype"], t["shape"]) for t in metadata.get("inputs", [])}
    for t in declared.inputs:
        shape = ([-1] if declared.batching else []) + list(t.shape)
        if t.name not in meta_inputs:
            problems.append(f"metadata has no input {t.name}")
        elif [int(d) for d in meta_inputs[t.name][1]] != shape:
            problems.append(f"metadata: input {t.name} shape {meta_inputs[t.name][1]}, declared {shape}")
    selected = list(declared.version_policy.served(on_disk))
    ready = _served_versions(metadata)
    if ready != selected:
        problems.append(f"READY versions {ready}, but version policy {declared.version_policy.describe()} selects "
                        f"{selected} of the version directories {on_disk}")
    answered = {}
    for version in ready:
        answer = answers[version]
        if not answer.ok:
            answered[version] = f"refused: {answer.error[:200]}"
            problems.append(f"version {version} did not answer a request of the declared inputs ({answered[version]})")
            continue
        found = [r for r in responses(answer) if r]
        bad = [f"{t.name} missing" if outputs.get(t.name) is None else
               f"{t.name} {list(outputs[t.name].shape)} {outputs[t.name].dtype}" for outputs in found
               for t in declared.outputs
               if outputs.get(t.name) is None or not fits_dims(outputs[t.name].shape, t.shape, declared.batching)
               or (t.dtype not in ("bytes", "bfloat16") and str(outputs[t.name].dtype) != t.dtype)]
        answered[version] = f"answered by version {answer.version or '?'} ({len(found)} response(s) with outputs)"
        if bad:
            problems.append(f"version {version} answered outputs unlike the declared ones: {', '.join(bad)}")
        if answer.version and answer.version != str(version):
            problems.append(f"a request for version {version} was answered by version {answer.version}")
    evidence = {"declared": want, "served": got, "versions_on_disk": on_disk, "selected": selected, "ready": ready,
                "answers": answered, "server_platform": served.platform, "server_backend": served.backend}
    return CheckResult(
        name, "identity",
        declared=f"{want['platform/backend']}, max_batch_size {declared.max_batch_size}, inputs {want['inputs']}; "
                 f"outputs {want['outputs']}; {declared.version_policy.describe()} of versions {on_disk} -> {selected}",
        observed=f"{got['platform/backend']}, max_batch_size {served.max_batch_size}; READY {ready}; "
                 + "; ".join(f"v{v} {a}" for v, a in answered.items()),
        verdict="fail" if problems else "pass", reason="; ".join(problems), evidence=evidence)
