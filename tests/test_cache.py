"""A cache that heals: a truncated cached artifact is noticed in one line and rebuilt, and the run serves it; what is
written through a deployment never reaches the cache (tritonsuite.core.integrity)."""
import json
import warnings

import numpy as np
import pytest

from tritonsuite.core.integrity import CacheHealed
from tritonsuite.deploy.export import export
from tritonsuite.deploy.repository import build_deployment, model_config
from tritonsuite.load.client import served_infer
from tritonsuite.models import default_registry
from tritonsuite.server import EmbeddedServer


def test_a_truncated_cached_artifact_is_rebuilt_and_served(tmp_path):
    spec = default_registry().get("identity", "tiny")
    cache = tmp_path / "cache"
    first = export(spec, "onnx", "fp32", cache)
    recorded = json.loads((first.path.parent / "artifact.json").read_text())
    assert recorded["size_bytes"] == first.path.stat().st_size > 0 and len(recorded["sha256"]) == 64

    good = first.path.read_bytes()
    first.path.write_bytes(good[: len(good) // 2])  # truncated on disk
    with pytest.warns(CacheHealed) as notices:
        healed = export(spec, "onnx", "fp32", cache)
    healed_notices = [w for w in notices if issubclass(w.category, CacheHealed)]
    assert len(healed_notices) == 1
    line = str(healed_notices[0].message)
    assert "\n" not in line and first.path.parent.name in line and f"{len(good)} recorded" in line
    assert not healed.cached and healed.path.read_bytes() == good
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheHealed)  # a sound entry is trusted without a notice
        assert export(spec, "onnx", "fp32", cache).cached

    repo = tmp_path / "repo"
    deployment = build_deployment(repo, model_config("identity", spec, healed.format, max_batch_size=8), healed)
    deployed = deployment / "1" / healed.path.name
    assert deployed.stat().st_ino != healed.path.stat().st_ino  # the deployment's own copy, not a hard link
    with EmbeddedServer(repo, tmp_path / "logs", auto_complete=False) as server:
        server.load(deployment)
        client = server.client()
        try:
            inputs = spec.example_inputs(2, 0)
            out = served_infer(client, "identity", spec, batched=True)(inputs)
            name = spec.outputs[0].name
            assert np.array_equal(out[name], inputs[spec.inputs[0].name])  # identity: the input back, bit for bit
        finally:
            client.close()

    with open(deployed, "r+b") as f:  # a write through the deployment
        f.write(b"\0" * 16)
    assert healed.path.read_bytes() == good
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheHealed)
        assert export(spec, "onnx", "fp32", cache).cached
