"""Where a deployment comes from, asked in one place (:func:`source_of`): a model the suite builds (exported,
cached, its configuration written from the profile, one deployment per scenario), or a team's deployment
(``--model-repository``: its directory copied unchanged and served as given, once). Each answers what differs
between the two: how rows name its serving, which weights its rows come from, how it is deployed, what its
accuracy is judged against and which file its weights are."""
from __future__ import annotations

from dataclasses import replace

from tritonsuite.core.description import as_served, describe
from tritonsuite.core.spec import ModelSpec
from tritonsuite.deploy import export as export_mod
from tritonsuite.deploy import userrepo, userserve
from tritonsuite.deploy.backends import backend_for
from tritonsuite.deploy.deployment import Deployment
from tritonsuite.deploy.repository import build_deployment, deployment_name
from tritonsuite.judge import responses as kinds
from tritonsuite.models.training import weights_origin, weights_sha256


class Built:
    """A model the suite builds: the profile's configuration per scenario, its export verified against eager."""

    @staticmethod
    def serving(scenario: str, streaming: bool) -> str:
        return "online" if scenario == "online" or streaming else "offline"  # accuracy: the offline deployment

    @staticmethod
    def weights(suite, model: str, spec: ModelSpec) -> str:
        if model not in suite.checkpoints and spec.train is None:
            files = list(spec.weights_files())
            return f"shipped weights ({', '.join(p.name for p in files)})" if files else "seeded random"
        return weights_origin(suite.checkpoint(model), user=model in suite.checkpoints)

    @staticmethod
    def deploy(suite, model: str, spec: ModelSpec, fmt: str, precision: str, scenario: str) -> Deployment:
        export_mod.check_supported(spec, fmt, precision)
        profile = suite.model_profile(model)
        name = deployment_name(spec, fmt, precision, scenario)
        config = profile.model_config(scenario, name, spec, fmt, precision)
        backend = backend_for(fmt)
        reason = backend.refuses(config) or suite.server.refuses(backend, config)
        if reason:  # known before any work: the case skips with the reason
            raise export_mod.ExportUnsupported(f"{spec.key} as {fmt} on the {suite.server.name} server: {reason}")
        artifact = export_mod.export(spec, fmt, precision, suite.cache_dir, checkpoint=suite.checkpoint(model),
                                     module=suite.eager_module(model) if precision == "fp32" else None,
                                     batch_sizes=profile.batch_sizes())
        backend.check_artifact(artifact, suite.server)  # e.g. a plan's TensorRT version against the server's
        directory = build_deployment(suite.repository_dir, config, artifact)
        suite.server.load(directory)
        served = suite.server.model_description(name)
        return Deployment(name, spec, artifact, config, directory, suite.server.backend_description(name), served,
                          as_served(describe(config), served))

    @staticmethod
    def reference(suite, model: str, spec: ModelSpec):
        return export_mod.eager_runner(suite.eager_module(model), spec)

    @staticmethod
    def weights_sha256(suite, model: str, spec: ModelSpec) -> str:
        return weights_sha256(suite.checkpoint(model), suite.eager_module(model)) or ""


class Served:
    """A team's deployment: its own model file is its weights, served as given under its own name, once."""

    @staticmethod
    def serving(scenario: str, streaming: bool) -> str:
        return "served"

    @staticmethod
    def weights(suite, model: str, spec: ModelSpec) -> str:
        return "the deployment's own model file"

    @staticmethod
    def deploy(suite, model: str, spec: ModelSpec, fmt: str, precision: str, scenario: str) -> Deployment:
        """Its whole directory (an ensemble's steps too) copied unchanged and loaded."""
        dep, entry = userrepo.read_deployment(spec.served_from.directory), spec.served_from
        backend = backend_for(fmt)
        if reason := backend.refuses(dep.config) or suite.server.refuses(backend, dep.config):
            raise export_mod.ExportUnsupported(f"{spec.name} ({dep.platform}) on the {suite.server.name} server: "
                                               f"{reason}")
        for name in (composing := kinds.composing_models(dep, suite.bls_composing)):  # a BLS model's callees first
            userserve.load(suite.registry.get(name.split(":")[0], spec.size), suite.server, suite.repository_dir,
                           suite._served)
        userserve.load(spec, suite.server, suite.repository_dir, suite._served)
        artifact = export_mod.Artifact(model=spec.name, size=spec.size, format=fmt, precision=precision,
                                       path=(served := suite.repository_dir / dep.name) / entry.version
                                       / dep.model_file.name, key=entry.model_file_digest or "",
                                       max_abs_error={}, max_rel_error={}, verified_batch_sizes=(), versions={},
                                       export_seconds=0.0)
        # a python model's kind as the server runs it (model.py may complete it); another's file, Triton's defaults
        running = suite.server.model_description(dep.name, composing)  # a BLS model's callees: as served
        declared = running if dep.auto_completed else as_served(  # shipped no config.pbtxt: what the server completed
            replace(dep.description, composing=dep.description.composing or running.composing), running)
        return Deployment(spec.name, spec, artifact, dict(dep.config), served, suite.server.backend_description(
            dep.name), running if dep.backend == "python" else declared, declared)

    @staticmethod
    def reference(suite, model: str, spec: ModelSpec):
        return suite.eager_module(model)  # the file, in-process

    @staticmethod
    def weights_sha256(suite, model: str, spec: ModelSpec) -> str:
        return spec.served_from.model_file_digest or ""  # a python model may have no reference


def source_of(spec: ModelSpec) -> type[Built] | type[Served]:
    """The one place that asks whether a spec is a team's served deployment or a model the suite builds."""
    return Served if spec.served_from is not None else Built
