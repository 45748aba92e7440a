"""The report's "Parameter Name | Parameter Value" table of a deployment: what it is, how it is served, on what."""
from __future__ import annotations

from pathlib import Path

from tritonsuite.core.device import gpu_description, host_description
from tritonsuite.core.published import PUBLISHED_PARAMETER
from tritonsuite.deploy.backends import backend_for, backend_of, instance_kind
from tritonsuite.deploy.formats import FORMATS, get_format
from tritonsuite.models.training import shipped_record, training_stats


def deployment_parameters(deployment, server, profile, weights: str, checkpoint: Path | None) -> dict:
    """``deployment``: a suite Deployment (artifact, spec, served_by, its description as served) on ``server`` under
    ``profile``; ``weights`` and ``checkpoint``: where its weights came from."""
    art, description = deployment.artifact, deployment.description
    cfg, backend = description.config, backend_of(description.config)
    params = {
        "GPU": gpu_description(profile.device, profile.gpu, server.local),
        "Backend": deployment.served_by,
        "Platform": backend_for(art.format).platform,
        "Backend accelerator": backend_for(art.format).accelerator_description(cfg),
        "Precision": art.precision.upper(),
        "Model format": get_format(art.format).display if art.format in FORMATS else f"{art.format} (as given)",
        "Max batch size": description.max_batch_size,
        "Number of model instances": description.instance_count,
        "Export format": art.format,
        "Device kind": instance_kind(cfg).replace("KIND_", "").lower(),
        "Model": f"{deployment.spec.key} ({deployment.spec.description})",
        "Threads per instance": (backend.threads(cfg) if backend else 0) or "runtime default",
        "Server": f"tritonserver {server.version()} ({server.provenance()})",
        "Host": host_description(server.local) if server.local else f"the host of {server.describe()}",
        "Artifact key": art.key[:16],
        "Weights": weights,
    }
    params["Profile"] = profile.name
    if profile.published:  # the join key of tritonsuite.core.published: whose published tables these rows meet
        params[PUBLISHED_PARAMETER] = profile.published
    batcher = description.dynamic_batching or description.sequence_batching
    if batcher is not None:  # the dynamic batcher's, or a sequence model's own batcher's
        params["Preferred batch sizes"] = " ".join(map(str, batcher.preferred_batch_sizes)) or "-"
        params["Max queue delay (us)"] = batcher.max_queue_delay_microseconds
    params.update(deployment.spec.parameters)
    # the served deployment's kind (a python model's config as the server completed it, a BLS model's callees)
    if description.kinds != ("model",):  # sequence (direct), decoupled, BLS, ...
        params["Deployment kind"] = ", ".join(description.kinds)
        if description.composing:
            params["Composing models"] = ", ".join(m.name for m in description.all_composing())
    if checkpoint is not None:
        trained = training_stats(checkpoint)
        stats = ", ".join(f"{k} {v}" for k, v in trained.items() if k != "training")
        shipped = shipped_record(checkpoint)
        params["Checkpoint"] = (str(checkpoint) if not trained else f"trained here ({stats})" if shipped is None else
                                f"shipped with tritonsuite: {shipped['file']}, sha256 {shipped['sha256'][:12]} "
                                f"(trained {shipped['trained']}, torch {shipped['torch']}: {stats})")
    params["Export max abs error"] = ", ".join(f"{k} {v:.2g}" for k, v in art.max_abs_error.items())
    return params
