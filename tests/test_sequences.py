"""Sequence models on the real embedded server: hand-written python-backend accumulators (``direct`` and
``oldest``, control inputs filled by the server) driven by the one engine with one live sequence per concurrency
slot (closed loop) or per request in flight (open loop), every open sequence ended when the point ends; accuracy:
each sequence interleaved under load equals the same sequence sent alone (and a model that ignores CORRID fails)."""
from pathlib import Path

import numpy as np
import pytest

from tests.kinds import FAST, sequence_model, served
from tritonsuite.core.description import SequenceSettings, SequenceSettingsError, describe, sequence_options
from tritonsuite.judge.responses import sequence_accuracy
from tritonsuite.load.engine import LoadPoint, measure
from tritonsuite.load.kinds.sequence import Sequences, draw_length

@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from served(tmp_path_factory, lambda repo: [
        sequence_model(repo, "seq_direct", "direct"), sequence_model(repo, "seq_oldest", "oldest"),
        sequence_model(repo, "seq_broken", "direct", broken=True),
        sequence_model(repo, "seq_one_slot", "direct", max_batch_size=1)])


def test_settings_follow_perf_analyzer():
    rng = np.random.default_rng(0)
    lengths = [draw_length(rng, SequenceSettings(length=10, variation_percent=20)) for _ in range(500)]
    assert min(lengths) >= 8 and max(lengths) <= 12 and len(set(lengths)) > 2
    assert {draw_length(rng, SequenceSettings(length=5, variation_percent=0)) for _ in range(20)} == {5}
    assert (sequence_options(4, 0, "5:9").id_start, sequence_options(4, 0, "5:9").id_end) == (5, 9)
    assert (sequence_options(4, 0, "7").id_start, sequence_options(4, 0, "7").id_end) == (7, 0)
    with pytest.raises(SequenceSettingsError, match=r"--sequence-id-range '5:x': expected START or START:END"):
        sequence_options(4, 0, "5:x")
    with pytest.raises(SequenceSettingsError, match="--sequence-id-range"):
        SequenceSettings(id_start=9, id_end=5)
    with pytest.raises(SequenceSettingsError, match="--sequence-length 0"):
        SequenceSettings(length=0)
    # ids wrap within the range and skip the live ones; a range narrower than the live sequences is refused
    seen = []
    seqs = Sequences(SequenceSettings(length=1, variation_percent=0, id_start=3, id_end=6),
                     lambda i, s, e: (seen.append((i, s, e)), None)[1])
    for slot in range(5):
        seqs.request(slot)
        seqs.done(slot)
    assert [i for i, _, _ in seen] == [3, 4, 5, 3, 4] and all(s and e for _, s, e in seen)
    # an ended sequence keeps its id until its end request is answered: a new sequence never takes it meanwhile
    seen.clear()
    seqs.request(0)  # id 5: starts and ends, its answer not yet in
    seqs.request(1), seqs.done(1)  # id 3
    assert [i for i, _, _ in seen] == [5, 3] and 5 in {q.sequence_id for q in seqs.live.values()}
    seqs.done(0)
    assert not seqs.live
    long = Sequences(SequenceSettings(length=100, variation_percent=0, id_start=1, id_end=3), lambda *a: a)
    long.request(0), long.request(1)
    with pytest.raises(SequenceSettingsError, match="all live"):
        long.request(2)


def test_open_loop_sends_to_the_sequence_that_waited_longest():
    """Answers come back before the next request is due, but once two were in flight at once: both live sequences
    must go on being sent to in turn. Sending to the first free slot starved the second past the server's idle
    timeout (its END then refused: "must specify the START flag", CI under three xdist workers, 2026-11-29)."""
    sent = []
    seqs = Sequences(SequenceSettings(length=1000, variation_percent=0, id_start=1), lambda i, s, e: sent.append(i))
    seqs.request(seqs.free_slot())  # slot 0, in flight
    seqs.request(seqs.free_slot())  # every live sequence busy: slot 1 begins a second sequence
    seqs.done(0), seqs.done(1)
    for _ in range(10):  # from now on, one request at a time, each answered before the next
        slot = seqs.free_slot()
        seqs.request(slot)
        seqs.done(slot)
    assert sent == [1, 2] + [1, 2] * 5 and len(seqs.live) == 2


@pytest.mark.parametrize("model", ["seq_direct", "seq_oldest"])
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_closed_and_open_loop(server, model, protocol):
    desc = describe(server.model_config(model))
    assert desc.sequence and desc.sequence_batching.strategy == model.split("_")[1]
    inputs = {"INPUT": np.ones((1, 1), np.int32)}
    desc = desc.with_sequences(length=6, variation_percent=50, id_start=100, id_end=200)
    closed = measure(server, model, inputs, desc.outputs, LoadPoint(1, 3, protocol=protocol), FAST,
                     description=desc)
    seq = closed.meta["sequences"]
    assert "server counted" not in " ".join(closed.reasons)  # every request the server answered, the client sent
    assert closed.meta["server_fail_delta"] == 0 and seq["sequences_started"] == seq["sequences_ended"] > 3
    assert seq["sequence_id_range"] == [100, 200] and closed.meta["kind"] == [f"sequence ({model[4:]})", "python"]
    assert 0 <= seq["ended_when_the_point_ended"] <= 3
    opened = measure(server, model, inputs, desc.outputs, LoadPoint(1, request_rate=60, protocol=protocol), FAST,
                     description=desc)
    assert opened.meta["server_fail_delta"] == 0
    assert opened.meta["sequences"]["sequences_started"] == opened.meta["sequences"]["sequences_ended"] > 0


@pytest.mark.parametrize("concurrency", [2, 4])
def test_sequences_waiting_in_the_backlog_for_the_one_slot(server, concurrency):
    """One slot (max_batch_size 1, one instance): every sequence but one waits in the sequence batcher's backlog.
    At the point's end each worker ends its own sequence as it stops; waiting for the backlogged requests first
    held the slot to the idle timeout (5 s), which released the slot's sequence, and its END then failed: "must
    specify the START flag on the first request of the sequence"."""
    desc = describe(server.model_config("seq_one_slot"))
    point = measure(server, "seq_one_slot", {"INPUT": np.ones((1, 1), np.int32)}, desc.outputs,
                    LoadPoint(1, concurrency), FAST, description=desc.with_sequences(length=5))
    seq = point.meta["sequences"]
    assert point.meta["server_fail_delta"] == 0 and seq["sequences_started"] == seq["sequences_ended"] > concurrency


def test_the_engine_refuses_a_sequence_point_of_batch_2_before_sending_it(server):
    desc = describe(server.model_config("seq_direct"))
    with pytest.raises(ValueError, match="seq_direct at batch 2: Triton's sequence batcher takes batch 1 per request"):
        measure(server, "seq_direct", {"INPUT": np.ones((2, 1), np.int32)}, desc.outputs, LoadPoint(2, 1), FAST,
                description=desc)


def _sequences(count=6, seed=0):
    rng = np.random.default_rng(seed)
    return [[{"INPUT": rng.integers(1, 50, (1, 1)).astype(np.int32)} for _ in range(int(rng.integers(3, 9)))]
            for _ in range(count)]


@pytest.mark.parametrize("model", ["seq_direct", "seq_oldest"])
def test_interleaved_equals_alone(server, model):
    sequences = _sequences()
    result = sequence_accuracy(server, server.model_description(model), "fp32", sequences, ["OUTPUT", "FLAGS"],
                               protocol="grpc")
    assert result.passed, result.failures
    assert result.samples == sum(len(s) for s in sequences) and result.metrics[0].value == 0
    # the outputs are the running sums (the model really kept per-sequence state)
    from tritonsuite.load.exchange import send_sequences

    outs = send_sequences(server, server.model_description(model), sequences[:1], ["OUTPUT", "FLAGS"], "http", first_id=77)[0]
    assert [int(o["OUTPUT"][0, 0]) for o in outs] == list(np.cumsum([int(s["INPUT"][0, 0]) for s in sequences[0]]))
    assert outs[0]["FLAGS"][0].tolist()[:2] == [1, 0] and outs[-1]["FLAGS"][0].tolist()[:2] == [0, 1]


def test_a_model_that_mixes_sequences_fails(server):
    result = sequence_accuracy(server, server.model_description("seq_broken"), "fp32", _sequences(), ["OUTPUT"],
                               protocol="grpc")
    assert not result.passed and result.metrics[0].value > 0
    assert "sequence" in result.metrics[0].worst and "OUTPUT" in result.metrics[0].worst


def test_conformance_identity_sends_a_sequence_and_skips_the_stateless_checks(server):
    from tritonsuite.judge.conformance import Target, run_check

    target = Target(server, server.model_repository / "seq_direct")
    identity = run_check(target, "identity")
    assert identity.verdict == "pass", identity.line()
    assert identity.evidence["answers"] == {1: "answered by version 1 (1 response(s) with outputs)"}
    refusals = run_check(target, "refusals")
    assert refusals.verdict == "skipped" and "sequence id and START/END" in refusals.reason


def test_an_offline_sweep_sends_a_sequence_model_batch_1_only(tmp_path):
    """Triton's sequence batcher refuses a request of batch > 1 (on any server): the sweep of a user's sequence
    model (default batch sizes 1 and its max_batch_size 8) measures batch 1 and skips batch 8 saying why."""
    from tests.helpers import raw_rows, run_pytest

    repo = tmp_path / "repo"
    sequence_model(repo, "seq_direct", "direct")
    profile = ("device: cpu\ngpu: none (CPU only)\nmeasurement: {window_ms: 300, min_requests_per_window: 5, "
               "stability_percentage: 100, max_trials: 6, warmup_ms: 200, client_bound_percent: 1000}\n")
    result = run_pytest(["--gpu", "tiny", "--model-repository", str(repo), "-m", "offline", "-rs",
                         "--sequence-length", "4", "-p", "no:warnings"], tmp_path, profile=profile, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed, 1 skipped" in result.stdout, result.stdout
    assert "batch 8: Triton's sequence batcher takes batch 1 per request" in result.stdout, result.stdout
    rows = raw_rows(tmp_path / "reports", "offline")
    assert [(r["batch"], r["status"]) for r in rows] == [(1, "OK")], [(r["batch"], r["reasons"]) for r in rows]
