"""Children that die with the suite's process, started without running fork handlers in the child
(tritonsuite.core.children): tritonserver aborted at start-up (-6) when gRPC's handlers ran there."""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from tritonsuite.core.children import dying_with_parent


def test_no_fork_handler_runs_in_the_child():
    """What a ``preexec_fn`` did: the process's fork handlers ran in the child (here Python's own, deterministic;
    gRPC's are C's, skipped the same way by vfork). In a fresh interpreter: in a process where gRPC is busy, the
    contrast's own child can be aborted by gRPC's handler (it was, in CI on three workers)."""
    script = ("import os, subprocess\n"
              "from tritonsuite.core.children import dying_with_parent\n"
              "read, write = os.pipe()\n"
              "os.register_at_fork(after_in_child=lambda: os.write(write, b'x'))\n"
              "subprocess.run(['/bin/true'], preexec_fn=lambda: None, check=True)\n"  # the way it was
              "subprocess.run(dying_with_parent(['/bin/true']), check=True)\n"
              "os.close(write)\n"
              "print(os.read(read, 16).decode())\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "x"  # once: the preexec_fn child's, none for the launcher's


def test_children_start_while_grpc_is_busy_in_other_threads():
    """The abort seen on three pytest workers, reproduced: 4 threads opening gRPC channels while children start. A
    child forked with a preexec_fn aborted about once in 50 ("epoll_wait error: Bad file descriptor", -6)."""
    grpc = pytest.importorskip("grpc")
    stop = threading.Event()

    def busy():
        while not stop.is_set():
            channel = grpc.insecure_channel("127.0.0.1:1")
            try:
                grpc.channel_ready_future(channel).result(timeout=0.01)
            except grpc.FutureTimeoutError:
                pass
            finally:
                channel.close()

    threads = [threading.Thread(target=busy, daemon=True) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        codes = [subprocess.run(dying_with_parent(["/bin/true"]), stderr=subprocess.PIPE, timeout=30)
                 for _ in range(150)]
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=5)
    failed = [(c.returncode, c.stderr[-200:]) for c in codes if c.returncode != 0]
    assert not failed, failed


def test_the_child_dies_with_its_parent():
    parent = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        "from tritonsuite.core.children import dying_with_parent\n"
        "child = subprocess.Popen(dying_with_parent(['sleep', '60']))\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        deadline = time.monotonic() + 10
        while _comm(child) != "sleep" and time.monotonic() < deadline:  # exec'd: the same pid, the program's name
            time.sleep(0.02)
        assert _comm(child) == "sleep"
        parent.kill()
        parent.wait(timeout=10)
        while _comm(child) not in (None, "") and time.monotonic() < deadline + 10:
            time.sleep(0.05)
        assert _comm(child) in (None, ""), f"pid {child} outlived its parent"
    finally:
        parent.kill()
        parent.wait(timeout=10)


def test_a_child_whose_parent_died_before_it_asked_does_not_run_the_program(tmp_path):
    command = dying_with_parent(["touch", str(tmp_path / "ran")])
    command[4] = "1"  # as if its parent were already gone (re-parented): not this process
    assert subprocess.run(command).returncode == 128 + signal.SIGKILL
    assert not (tmp_path / "ran").exists()


def _comm(pid: int) -> str | None:
    """The process's name, "" for a zombie (dead, not reaped: init reaps it), None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except FileNotFoundError:
        return None
    return "" if stat.rsplit(")", 1)[1].split()[0] == "Z" else stat[stat.index("(") + 1:stat.rindex(")")]
