"""The worker-process source without a server: --workers' values, what auto chooses, how a point is split (slots,
rates, sequence ids, probes), and how the workers' reports merge onto one clock."""
import math
from types import SimpleNamespace

import numpy as np
import pytest

from tritonsuite.core.description import describe
from tritonsuite.core.settings import parse_workers
from tritonsuite.core.spec import TensorSpec
from tritonsuite.load import sources
from tritonsuite.load.engine import LoadPoint, Traffic
from tritonsuite.load.sources.workers import WorkerSource, _Feed, choose, split

from tests.helpers import plugin_options


def _description(sequence: bool = False):
    config = {"name": "m", "max_batch_size": 8, "input": [{"name": "INPUT", "data_type": "TYPE_INT32", "dims": [1]}],
              "output": [{"name": "OUTPUT", "data_type": "TYPE_INT32", "dims": [1]}]}
    if sequence:
        config["sequence_batching"] = {"direct": {}}
    return describe(config)


def _traffic(point, sequence=False, probes=0, sequences=None):
    batch = {"INPUT": np.zeros((point.batch_size, 1), np.int32)}
    return Traffic("m", batch, [TensorSpec("OUTPUT", "int32", (1,))], point,
                   _description(sequence).with_sequences(**(sequences or {})),
                   probes=tuple(batch for _ in range(probes)), probe_share=0.5 if probes else 0.0, probe_seed=7)


@pytest.mark.parametrize("value", ["0", "two", "-1", "1.5", "", "257", True])
def test_a_bad_workers_value_is_one_line_naming_it_and_the_valid_choices(value):
    with pytest.raises(ValueError) as bad:
        parse_workers(value)
    text = str(bad.value)
    assert "\n" not in text and text.startswith(f"--workers {value!r}") and "from 1 to 256" in text and "auto" in text


def test_workers_values_and_the_registry():
    assert parse_workers("auto") == "auto" and parse_workers("AUTO") == "auto" and parse_workers(" 4 ") == 4
    assert parse_workers(2) == 2
    assert sources.get("suite", 1) is sources.get("suite")  # one process: the engine itself
    assert isinstance(sources.get("suite", 2), WorkerSource) and isinstance(sources.get("suite", "auto"), WorkerSource)
    assert sources.get("perf_analyzer", 4) is sources.get("perf_analyzer")  # its own threads
    source = sources.get("suite", 2)
    assert all(source.can(c) for c in (sources.PROBES, sources.OPEN_LOOP, sources.STOP_EARLY, sources.PROGRESS))
    assert not source.can(sources.TOGETHER)


def test_the_options_refuse_a_bad_workers_value_before_anything_starts(tmp_path):
    from tritonsuite.run.checks import OptionError
    from tritonsuite.run.options import resolve_options

    with pytest.raises(OptionError) as bad:
        resolve_options(plugin_options(workers="lots"), tmp_path)
    assert str(bad.value).startswith("--workers 'lots': valid choices: a whole number of worker processes from 1")
    assert resolve_options(plugin_options(workers="auto"), tmp_path).workers == "auto"
    assert resolve_options(plugin_options(), tmp_path).workers == 1  # the profile's (cpu: none given)


def test_auto_chooses_from_the_load_and_the_cores_and_says_so():
    n, why = choose("auto", LoadPoint(1, 16), server_local=True, cores=2)
    assert n == 1 and "2 cores" in why and "half left to the server" in why
    n, why = choose("auto", LoadPoint(1, 64), server_local=True, cores=16)
    assert n == 8 and why.startswith("auto: 8")
    assert choose("auto", LoadPoint(1, 64), server_local=False, cores=16)[0] == 8  # 64 slots need 8
    assert choose("auto", LoadPoint(1, request_rate=20000.0), server_local=False, cores=16)[0] == 5
    assert choose(4, LoadPoint(1, 2), server_local=True) == (2, "4 asked; 2: no more processes than concurrency 2 "
                                                                "has slots")


def test_a_point_splits_into_slots_rates_probes_and_disjoint_sequence_ids():
    shares = split(_traffic(LoadPoint(1, 7), probes=5), 3)
    assert [s.point.concurrency for s in shares] == [3, 2, 2]
    assert [len(s.probes) for s in shares] == [2, 2, 1] and [s.probe_seed for s in shares] == [7, 8, 9]
    rates = split(_traffic(LoadPoint(1, request_rate=90.0, seed=5)), 3)
    assert [s.point.request_rate for s in rates] == [30.0, 30.0, 30.0] and [s.point.seed for s in rates] == [5, 6, 7]
    seq = split(_traffic(LoadPoint(1, 4), sequence=True, sequences={"id_start": 10, "id_end": 30}), 2)
    assert [(s.description.sequences.id_start, s.description.sequences.id_end) for s in seq] == [(10, 20), (20, 30)]
    open_ended = split(_traffic(LoadPoint(1, 4), sequence=True), 2)
    (a0, a1), (b0, b1) = [(s.description.sequences.id_start, s.description.sequences.id_end) for s in open_ended]
    assert a1 <= b0 and a1 - a0 == b1 - b0 > 1000
    with pytest.raises(ValueError, match="--sequence-id-range 1:5: 4 ids over 2 worker processes leave 2 each"):
        split(_traffic(LoadPoint(1, 4), sequence=True, sequences={"id_start": 1, "id_end": 5}), 2)


def _feed(n: int) -> _Feed:
    feed = object.__new__(_Feed)
    feed.pending, feed.watermarks = [[] for _ in range(n)], [0.0] * n
    feed.samples, feed.finished_at, feed.origin, feed.timings = [], [], [], []
    feed.probe_responses, feed.cpu, feed.at_length, feed.completed = [], [0.0] * n, {}, 0
    feed.progress = SimpleNamespace(set=lambda: None)
    return feed


def _report(feed, i, finished, watermark):
    finished = np.asarray(finished, dtype=np.float64)
    samples = np.column_stack([finished, np.zeros((len(finished), 3))]) if len(finished) else np.zeros((0, 4))
    feed._take(i, finished, samples, None, watermark, 0.0, [])


def test_reports_merge_in_completion_order_up_to_the_least_watermark():
    feed = _feed(2)
    _report(feed, 0, [1.0, 2.0, 3.0], 3.5)
    assert feed.finished_at == []  # worker 2 has not said where it stands: nothing is known complete yet
    _report(feed, 1, [1.5, 2.5], 2.6)
    assert feed.finished_at == [1.0, 1.5, 2.0, 2.5] and feed.origin == [0, 1, 0, 1] and feed.at_length[4] == 2.6
    _report(feed, 1, [], math.inf)  # worker 2 is done
    assert feed.finished_at == [1.0, 1.5, 2.0, 2.5, 3.0] and feed.completed == 5
    assert [s[0] for s in feed.samples] == feed.finished_at


def test_the_workers_cpu_is_counted_from_where_the_windows_begin():
    """Not from the workers' start: their imports and connections are in no window (they made a 2-worker row's client
    CPU read 48% where one process used 7%)."""
    feed = _feed(2)
    feed.cpu = [1.2, 1.3]  # seconds each worker had used when the warm-up ended
    feed._cpu_mark = 0.0  # what run_together does where the windows begin
    assert feed.cpu_at_cut == [1.2, 1.3]



def test_a_watched_pipe_end_stays_blocking_so_a_full_pipe_waits_instead_of_failing():
    """uvloop's add_reader makes a descriptor non-blocking; a worker's report larger than the pipe's buffer, sent
    while the parent read slowly, then raised BlockingIOError and the worker died ("exit status 1", 8 workers on 2
    cores). Through watch() the send waits for the reader."""
    import asyncio
    import multiprocessing
    import os
    import threading
    import time

    from tritonsuite.load.interrupt import run
    from tritonsuite.load.sources.processes import watch

    ours, theirs = multiprocessing.Pipe()
    report = np.zeros(1 << 20)  # 8 MiB: far more than a pipe holds

    async def main():
        watch(asyncio.get_running_loop(), ours, lambda: None)
        blocking = os.get_blocking(ours.fileno())
        asyncio.get_running_loop().remove_reader(ours.fileno())
        return blocking

    sent, got = [], []

    def send():
        try:
            ours.send(report)
            sent.append("sent")
        except OSError as exc:  # before the fix: BlockingIOError once the pipe is full
            sent.append(repr(exc))

    def read():
        time.sleep(0.3)  # a slow parent
        if theirs.poll(30):
            got.append(theirs.recv())

    try:
        assert run(main()) is True
        threads = [threading.Thread(target=send, daemon=True), threading.Thread(target=read, daemon=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    finally:
        ours.close()  # a reader left waiting for the rest of a message sees the end of the pipe
        theirs.close()
    assert sent == ["sent"] and len(got) == 1 and got[0].shape == report.shape, sent
