"""FastPitch (tiny) on the real embedded Triton: dynamic batching must not change a sample's valid frames (padded
outputs come back as a stock backend returns them, and comparisons trim by the declared valid lengths), and system
shared memory carries outputs of dynamic shape."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tritonsuite.core.tensors import compare_outputs, pad_to_common_shape
from tritonsuite.deploy.export import export
from tritonsuite.deploy.repository import build_deployment, model_config
from tritonsuite.load.client import SharedMemoryRegions, infer_tensors, served_infer
from tritonsuite.load.engine import LoadPoint, MeasurementSettings, measure
from tritonsuite.models import default_registry
from tritonsuite.models import fastpitch as fp
from tritonsuite.server import EmbeddedServer

pytestmark = pytest.mark.smoke


@pytest.fixture(scope="module")
def spec():
    return default_registry().get("fastpitch", "tiny")


@pytest.fixture(scope="module")
def served(spec, tmp_path_factory):
    artifact = export(spec, "ts-trace", "fp32", tmp_path_factory.mktemp("cache"))
    repo = tmp_path_factory.mktemp("repo")
    with EmbeddedServer(repo, tmp_path_factory.mktemp("logs"), auto_complete=False) as server:
        server.load(build_deployment(repo, model_config("static", spec, artifact.format, max_batch_size=4,
                                                        intra_op_threads=1), artifact))
        # a long queue delay so that concurrent requests are surely executed together
        server.load(build_deployment(repo, model_config(
            "dynamic", spec, artifact.format, max_batch_size=4, intra_op_threads=1, dynamic_batching=True,
            preferred_batch_sizes=(4,), max_queue_delay_microseconds=2_000_000), artifact))
        yield server


def _executions(client, model):
    stats = client.get_inference_statistics(model)["model_stats"][0]
    return stats["execution_count"], stats["inference_count"]


def test_a_sample_gets_the_same_result_alone_and_dynamically_batched_with_longer_ones(served, spec):
    sentences = fp.load_sentences()
    length = 90
    texts = ["Thank you."] + sorted((s for s in sentences if 60 < len(s) <= length), key=len)[-3:]
    ids = fp.encode_texts(texts, length)  # equal shapes, so the dynamic batcher may group them
    def infer(row):
        own = served.client()  # one connection per concurrent request
        try:
            return served_infer(own, "dynamic", spec, batched=True)({"INPUT__0": row[None]})
        finally:
            own.close()

    client = served.client()
    try:
        alone = [infer(row) for row in ids]
        executions_before, inferences_before = _executions(client, "dynamic")
        with ThreadPoolExecutor(len(ids)) as pool:
            together = list(pool.map(infer, ids))
        executions_after, inferences_after = _executions(client, "dynamic")
    finally:
        client.close()
    assert inferences_after - inferences_before == 4
    assert executions_after - executions_before < 4, "the four requests were not batched together"
    short_frames = int(alone[0]["OUTPUT__1"][0, 0])
    assert max(int(a["OUTPUT__1"][0, 0]) for a in alone) > short_frames  # its batch was padded past its length
    longest = max(int(a["OUTPUT__1"][0, 0]) for a in alone)
    for a, t in zip(alone, together):
        frames = int(a["OUTPUT__1"][0, 0])
        assert a["OUTPUT__0"].shape == (1, fp.N_MEL, frames)
        # as a stock backend returns it: the request's slice of the batch, padded to the batch's longest sample;
        # its valid frames equal the sample alone, and the padding is zeros
        assert t["OUTPUT__0"].shape == (1, fp.N_MEL, longest)
        np.testing.assert_allclose(t["OUTPUT__0"][..., :frames], a["OUTPUT__0"], atol=1e-5, rtol=1e-5)
        assert not t["OUTPUT__0"][..., frames:].any()
        for name in ("OUTPUT__1", "OUTPUT__2"):
            np.testing.assert_array_equal(t[name], a[name])
        for name in ("OUTPUT__3", "OUTPUT__4"):
            np.testing.assert_allclose(t[name], a[name], atol=1e-5, rtol=1e-5)
    # the comparison the accuracy scenario uses judges valid frames only, so batching cannot fail a deployment
    stacked = {n: np.concatenate(pad_to_common_shape([t[n] for t in together])) for n in together[0]}
    alone_stacked = {n: np.concatenate(pad_to_common_shape([a[n] for a in alone])) for n in alone[0]}
    assert all(c.passed for c in compare_outputs(stacked, alone_stacked, spec, "fp32"))


def test_shared_memory_carries_outputs_of_dynamic_shape(served, spec):
    inputs = spec.example_inputs(2, 0)
    client = served.client()
    try:
        over_http = served_infer(client, "static", spec, batched=True)(inputs)
        with SharedMemoryRegions(served, inputs, spec.outputs, 2) as shm:
            tensors, requested = infer_tensors(inputs, [t.name for t in spec.outputs], shm)
            result = client.infer("static", tensors, outputs=requested)
            for t in spec.outputs:
                shape = tuple(result.get_output(t.name)["shape"])  # the actual shape, within the region's bound
                np.testing.assert_array_equal(shm.read_output(t.name, shape, t.dtype), over_http[t.name])
    finally:
        client.close()
    settings = MeasurementSettings(window_ms=200, min_requests_per_window=3, stability_percentage=50, max_trials=4,
                                   warmup_ms=100)
    m = measure(served, "static", spec.example_inputs(2, 0), spec.outputs, LoadPoint(2, 1, True), settings,
                description=served.model_description("static"))
    assert m.meta["shared_memory"] == "system" and m.meta["server_fail_delta"] == 0
    assert m.meta["server_success_delta"] == m.meta["requests_sent"] > 0


FASTPITCH_TINY_PROFILE = """
device: cpu
gpu: none (CPU only)
measurement: {window_ms: 300, min_requests_per_window: 3, stability_percentage: 50, max_trials: 6, warmup_ms: 200}
models:
  fastpitch:
    size: tiny
    formats: [onnx]
    precisions: [fp32]
    max_batch_size: 4
    intra_op_threads: 1
    offline: {batch_sizes: [2]}
    online: {batch_size: 1, concurrency: [2], preferred_batch_sizes: [2], max_queue_delay_microseconds: 200}
"""


def test_accuracy_with_a_user_checkpoint_and_sentences(tmp_path):

    import torch

    from tests.helpers import raw_rows, run_pytest

    module = fp.build_module("tiny")
    with torch.no_grad():
        module.projection.bias.fill_(40.0)  # every mel value out of the seed's sanity range [-15, 3]
    torch.save(module.state_dict(), tmp_path / "fastpitch.pt")
    (tmp_path / "sentences.txt").write_text("A short one.\nA somewhat longer sentence, read aloud.\nGood night.\n")
    result = run_pytest(["--gpu", "tiny", "-m", "accuracy", "--models", "fastpitch", "-q", "-p", "no:warnings",
                         "--checkpoint", f"fastpitch={tmp_path / 'fastpitch.pt'}",
                         "--dataset", f"fastpitch={tmp_path / 'sentences.txt'}"], tmp_path, profile=FASTPITCH_TINY_PROFILE)
    assert result.returncode == 1, result.stdout + result.stderr  # the checkpoint's mel fails the sanity check
    assert "mel_in_range_share = 0.0000 (threshold >= 0.9900); worst example: sentence 0 ('A short one.')" in result.stdout
    rows = raw_rows(tmp_path / "reports", "accuracy")
    assert len(rows) == 1 and rows[0]["samples"] == 3
    metrics = rows[0]["metrics"]  # the deployment still reproduces its eager reference exactly
    assert metrics["lengths_and_durations_equal_share"] == 1.0 and metrics["mel_in_range_share"] == 0.0
