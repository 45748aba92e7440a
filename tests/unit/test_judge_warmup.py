"""The warmup check's judging (tritonsuite.judge.conformance.warmup): when a first request after a load is slow,
and what the loads' rounds and the restore afterwards say, as observations built to cause each reason (the check
itself runs on the real server in tests/test_conformance_fields.py)."""
from __future__ import annotations

from tritonsuite.judge.conformance.warmup import FACTOR, SLACK_MS, judge_warmup, slow


def rounds(*firsts: float, median: float = 2.0) -> list[dict]:
    return [{"first_ms": f, "steady_median_ms": median, "slow": slow(f, median)} for f in firsts]


def test_a_first_request_is_slow_only_over_the_slack_where_the_median_is_small():
    assert (FACTOR, SLACK_MS) == (3.0, 100.0)
    assert not slow(102.0, 2.0)  # 51x the median, but only the slack over it
    assert slow(102.01, 2.0)


def test_a_first_request_is_slow_only_over_the_factor_where_the_median_is_large():
    assert not slow(300.0, 100.0)  # the slack passed, the factor not
    assert slow(300.01, 100.0)


def test_a_first_request_fast_after_the_first_load_passes():
    assert judge_warmup(rounds(2.5), served_warmup=True) == []


def test_a_first_request_slow_once_then_fast_passes():
    assert judge_warmup(rounds(400.0, 2.5), served_warmup=True) == []


def test_a_first_request_slow_after_every_load_fails():
    assert judge_warmup(rounds(400.0, 310.25), served_warmup=True) == [
        "model_warmup declared, but the first request after each of 2 loads took 310.2 ms of compute against a "
        "steady median of 2.00 ms"]


def test_a_slow_first_request_where_the_server_serves_no_warmup_says_so():
    assert judge_warmup(rounds(400.0, 400.0), served_warmup=False) == [
        "model_warmup declared, but the first request after each of 2 loads took 400.0 ms of compute against a "
        "steady median of 2.00 ms (the server serves no model_warmup)"]


def test_a_failed_restore_fails_a_passing_warmup_and_follows_a_slow_one():
    assert judge_warmup(rounds(2.5), True, "failed to load 'm': version 1 is at UNAVAILABLE state") == [
        "restoring the deployment afterwards failed: failed to load 'm': version 1 is at UNAVAILABLE state"]
    assert judge_warmup(rounds(400.0, 400.0), True, "gone") == [
        "model_warmup declared, but the first request after each of 2 loads took 400.0 ms of compute against a "
        "steady median of 2.00 ms", "restoring the deployment afterwards failed: gone"]


def test_a_first_request_slow_after_every_load_is_described_by_the_last_load():
    assert judge_warmup(rounds(400.0, 350.0, 310.25), served_warmup=True) == [
        "model_warmup declared, but the first request after each of 3 loads took 310.2 ms of compute against a "
        "steady median of 2.00 ms"]


def test_a_remote_server_is_never_reloaded_unasked_and_each_declared_sample_is_named(tmp_path):
    """Before any request: a batchless model's warm-up sample has no batch_size in its configuration (Triton's
    default, 0), a count of 0 means once; the remote server (nothing listens at its address) is not touched."""
    from tritonsuite.judge.conformance import Target
    from tritonsuite.judge.conformance.warmup import check_warmup
    from tritonsuite.server import RemoteServer

    (tmp_path / "warm").mkdir()
    (tmp_path / "warm" / "config.pbtxt").write_text('''
name: "warm"
backend: "python"
input { name: "X" data_type: TYPE_FP32 dims: [4] }
output { name: "Y" data_type: TYPE_FP32 dims: [4] }
model_warmup { name: "zeros" inputs { key: "X" value { data_type: TYPE_FP32 dims: [4] zero_data: true } } }
model_warmup { name: "twice" batch_size: 1 count: 2 inputs { key: "X" value { data_type: TYPE_FP32 dims: [4]
  random_data: true } } }
''')
    result = check_warmup(Target(RemoteServer("127.0.0.1:1"), tmp_path / "warm"))
    assert (result.verdict, result.observed) == ("skipped", "-"), result.line()
    assert result.declared == ("model_warmup zeros (batch 0, count 1, inputs ['X']); twice (batch 1, count 2, inputs "
                               f"['X']): the first request after a load within {FACTOR:g}x the steady median compute "
                               f"time or {SLACK_MS:g} ms over it")
    assert result.reason == ("the check reloads the model: a remote server is reloaded only with --allow-reload "
                             "(never a team's server unasked)")
