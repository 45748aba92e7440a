"""How busy the host was: other processes' CPU, without the server's and the load generator's own."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time

from tritonsuite.load.hostload import CpuReading, HostCpu, other_cpu_percent


def test_other_cpu_is_busy_time_less_the_server_and_this_process():
    before, after = CpuReading(busy=100.0, server=10.0, own=5.0), CpuReading(busy=103.0, server=11.0, own=5.5)
    assert other_cpu_percent(before, after, 2.0) == 75.0  # 1.5 s of others over 2 s
    assert other_cpu_percent(before, CpuReading(100.5, 11.0, 5.0), 1.0) == 0.0  # processes that ended: floor 0
    assert other_cpu_percent(before, after, 0.0) == 0.0


def test_a_burning_process_counts_as_other_unless_it_is_the_server():
    """Judged against the CPU the burner actually got (psutil's count of its own time), so a busy host, where it
    gets less than a core, does not fail the test."""
    import psutil

    burner = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 3\nwhile time.time() < end: pass"])
    try:
        proc = psutil.Process(burner.pid)
        others, as_server = HostCpu(), HostCpu(lambda: [burner.pid])
        time.sleep(0.3)  # the interpreter has started and burns
        t0, cpu0 = time.monotonic(), sum(proc.cpu_times()[:2])
        a, b = others.read(), as_server.read()
        time.sleep(1.0)
        a2, b2 = others.read(), as_server.read()
        t1, cpu1 = time.monotonic(), sum(proc.cpu_times()[:2])
        elapsed, burned = t1 - t0, cpu1 - cpu0
        burned_percent = burned / elapsed * 100
        assert burned > 0.1  # it ran
        assert b2.server - b.server >= burned - 0.1  # the burner's time, read as the server's
        everyone = other_cpu_percent(a, a2, elapsed)
        assert everyone >= burned_percent - 15  # counted as other load, whatever else the host does
        assert other_cpu_percent(b, b2, elapsed) <= everyone - burned_percent + 15  # not when it is the server
    finally:
        burner.kill()
        burner.wait()


def test_this_process_is_not_other_load():
    """This process's own CPU is in the host's busy time and taken out of the other load: whatever else the host
    does, the other load is at most the host's busy time less this process's (0.1 s of slack for the kernel's
    ticks; this process burns 0.3 s)."""
    host = HostCpu()
    t0, a = time.monotonic(), host.read()
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass
    b, elapsed = host.read(), time.monotonic() - t0
    own = b.own - a.own
    assert own >= 0.25 and b.busy - a.busy >= own - 0.1  # the host's count has this process's time in it
    assert other_cpu_percent(a, b, elapsed) <= (b.busy - a.busy - own + 0.1) / elapsed * 100


def test_busyhost_spins_as_many_burners_as_cores_asked_and_leaves_none(tmp_path, monkeypatch, capsys):
    """``tritonsuite busyhost --cores 2``: two burner processes run beside the command, and none outlives it; a
    command that wrote no report gets one line saying so."""
    import argparse

    from tritonsuite.load import busyhost

    seen = tmp_path / "burners"
    count = ("import os, pathlib, subprocess\n"  # the burners beside it: its parent's other children
             "ps = subprocess.run(['ps', '-ww', '-eo', 'ppid=,args='], capture_output=True, text=True).stdout\n"
             "burners = sum(line.split()[0] == str(os.getppid()) and ('perf_counter() ' + '< end') in line\n"
             "              for line in ps.splitlines())\n"
             f"pathlib.Path({str(seen)!r}).write_text(str(burners))")
    parser = argparse.ArgumentParser()
    busyhost.add_arguments(parser)
    args = parser.parse_args(["--cores", "2", "--on", "0.2", "--off", "0", "--", sys.executable, "-c", count])
    monkeypatch.chdir(tmp_path)
    assert busyhost.run(args, parser) == 0
    assert seen.read_text() == "2"
    assert "no summary: the run left no readable manifest (ValueError: no manifest in reports)" in \
        capsys.readouterr().out
    ps = subprocess.run(["ps", "-ww", "-eo", "ppid=,stat=,args="], capture_output=True, text=True).stdout
    assert not [line for line in ps.splitlines() if line.split()[0] == str(os.getpid()) and "Z" not in line.split()[1]
                and "perf_counter() < end" in line]


def test_busyhost_refuses_a_core_count_naming_the_valid_range(capsys):
    import argparse

    import pytest

    from tritonsuite.load import busyhost

    parser = argparse.ArgumentParser()
    busyhost.add_arguments(parser)
    with pytest.raises(SystemExit):
        busyhost.run(parser.parse_args(["--cores", "0", "--", "true"]), parser)
    assert "--cores 0: valid: 1 to 64" in capsys.readouterr().err


def test_busyhost_terminated_leaves_neither_its_burners_nor_its_command(tmp_path):
    """SIGTERM to ``tritonsuite busyhost`` (a CI job cancelled): its command is passed the signal and its burners
    are killed; nothing it started outlives it."""
    import signal

    process = subprocess.Popen([sys.executable, "-m", "tritonsuite.cli", "busyhost", "--cores", "2", "--on", "0.2",
                                "--off", "0", "--", sys.executable, "-c", "import time; time.sleep(120)"],
                               cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def children() -> list[str]:
        ps = subprocess.run(["ps", "-ww", "-eo", "pid=,ppid=,args="], capture_output=True, text=True).stdout
        return [line for line in ps.splitlines() if line.split()[1] == str(process.pid)]

    try:
        deadline = time.monotonic() + 60
        while len(children()) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(children()) == 3, children()  # two burners, then the command
        pids = [int(line.split()[0]) for line in children()]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=90) == 128 + signal.SIGTERM
        ps = subprocess.run(["ps", "-eo", "pid=,stat="], capture_output=True, text=True).stdout.split("\n")
        alive = [line for line in ps if line.split() and int(line.split()[0]) in pids and "Z" not in line.split()[1]]
        assert alive == []
    finally:
        if process.poll() is None:
            process.kill()


def test_a_server_process_that_ends_between_two_readings_keeps_its_time_in_the_server_s():
    """A python-backend stub that ends (a model unloaded) between two readings: its time stays the server's through
    the parent that reaps it, so the server's time does not fall, and the CPU it burned after the first reading is
    the server's, not other load. Judged by CPU time, not wall time: a busy host changes nothing."""
    import psutil

    tree = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        "stub = subprocess.Popen([sys.executable, '-c', 'import time\\nwhile time.process_time() < 1.5: pass'])\n"
        "stub.wait()\n"  # reaped by its parent, as tritonserver reaps its stubs
        "time.sleep(60)\n")])
    try:
        root = psutil.Process(tree.pid)
        server = HostCpu(lambda: [root.pid] + [c.pid for c in root.children(recursive=True)])
        deadline = time.monotonic() + 60
        stub = None
        while time.monotonic() < deadline:  # the stub has burned 0.5-1.0 s of its 1.5
            children = root.children()
            if children:
                stub = children[0]
                with contextlib.suppress(psutil.Error):
                    if 0.5 <= sum(stub.cpu_times()[:2]) < 1.0:
                        break
            time.sleep(0.01)
        a = server.read()
        while time.monotonic() < deadline and root.children():  # ended and reaped
            time.sleep(0.05)
        assert not root.children()
        b = server.read()
        assert b.server - a.server >= 0.45, (a, b)  # what it burned after the first reading: at least 0.5 s
    finally:
        tree.kill()
        tree.wait()
