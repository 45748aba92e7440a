"""Debian's nginx, started by a test on 127.0.0.1 as a reverse proxy in front of an HTTP upstream (Triton's HTTP
endpoint): how clients behave when TLS is terminated, a bearer token is asked for, or a proxy answers 502/504 or
closes a keep-alive connection (nginx's default: after its 1000th request) that Triton itself would not.

Layout of ``directory``: ``conf/nginx.conf`` (mode 0600 in a 0700 folder: it holds the token), ``logs/`` (error,
access, nginx's own output, pid), ``tmp/`` (nginx's temp paths). A test searching for the token in what the proxy
wrote searches ``logs/`` only: the conf has it by design."""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

NGINX: str | None = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
WHY_NOT = "nginx is not installed (Debian's package: apt-get install nginx)"

READY_S = 10.0  # from start to a port that accepts
STOP_S = 5.0  # SIGQUIT (graceful) to SIGKILL
TRIES = 5  # ports tried when another process took the free one first
_TOKEN = re.compile(r"[A-Za-z0-9._~+/-]+=*")  # RFC 6750's b64token: nothing to quote in the conf
_UPSTREAM = re.compile(r"[A-Za-z0-9.-]+:\d+|\[[0-9A-Fa-f:.]+\]:\d+")  # host:port, as Triton's clients take it

_CONF = """\
# written by tests/proxy.py for one test; holds the token when one is set (mode 0600)
{user}worker_processes 1;
pid logs/nginx.pid;
lock_file logs/nginx.lock;
error_log logs/error.log warn;
worker_shutdown_timeout 3s;
events {{ worker_connections 512; }}
http {{
    access_log logs/access.log combined;
    client_body_temp_path tmp/client_body;
    proxy_temp_path tmp/proxy;
    fastcgi_temp_path tmp/fastcgi;
    uwsgi_temp_path tmp/uwsgi;
    scgi_temp_path tmp/scgi;
    client_max_body_size 0;
    upstream upstream_http {{
        server {upstream};
        keepalive 32;
    }}
    server {{
        listen 127.0.0.1:{port}{ssl};
{tls}        location / {{
{auth}            proxy_pass http://upstream_http;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
{timeout}        }}
    }}
}}
"""


def _quoted(value: str | Path) -> str:
    """A path for the conf, refused where nginx would read it otherwise ($: a variable in ssl_certificate)."""
    text = str(value)
    if any(c in text for c in '"\\$') or any(ord(c) < 0x20 for c in text):
        raise ValueError(f"not usable in nginx's conf: {text!r}")
    return f'"{text}"'


def _free_port() -> int:
    """A port free a moment ago; nginx may still lose it to another process (then the next try takes another)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _group(pgid: int) -> list[int]:
    """The processes (zombies too) of process group ``pgid``: the master and its workers share the one its
    ``start_new_session`` made."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # state, ppid, pgrp, ...: the name before may hold spaces
        if int(fields[2]) == pgid:
            found.append(int(entry.name))
    return found


def _subreaper(on: int) -> int:
    """Sets PR_SET_CHILD_SUBREAPER, returns what it was: workers orphaned by a SIGKILL-ed master come to us to
    be reaped, not to a PID 1 that may never reap them."""
    libc = ctypes.CDLL(None, use_errno=True)
    was = ctypes.c_int(0)
    libc.prctl(37, ctypes.byref(was), 0, 0, 0)  # PR_GET_CHILD_SUBREAPER
    libc.prctl(36, on, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    return was.value


class Nginx:
    """``with Nginx(tmp_path / "proxy", "127.0.0.1:8000") as proxy:`` then clients use ``proxy.url``.

    ``tls=(cert, key)``: TLS (HTTP/1.1) terminated at nginx. ``client_ca``: with ``tls``, a client certificate signed
    by it is asked for (nginx answers 400 without one or with another). ``token``: no Authorization header gets
    401, another than ``Bearer <token>`` 403. ``read_timeout_s``: proxy_read_timeout, to provoke 504 from a slow
    upstream (one that refuses connections gives 502). nginx's keep-alive defaults are kept on purpose."""

    def __init__(self, directory: Path, upstream: str, *, tls: tuple[Path, Path] | None = None,
                 token: str | None = None, read_timeout_s: float | None = None, client_ca: Path | None = None):
        if NGINX is None:
            raise RuntimeError(WHY_NOT)
        if not _UPSTREAM.fullmatch(upstream):
            raise ValueError(f"upstream is host:port, not {upstream!r}")
        if token is not None and not _TOKEN.fullmatch(token):
            raise ValueError("token: letters, digits and -._~+/ (then = padding) only")
        if client_ca is not None and tls is None:
            raise ValueError("client_ca needs tls")
        self.directory = Path(directory).resolve()
        self.upstream, self.tls, self.token = upstream, tls, token
        self.read_timeout_s, self.client_ca = read_timeout_s, client_ca
        self.conf = self.directory / "conf" / "nginx.conf"
        self.logs = self.directory / "logs"
        self.error_log, self.access_log = self.logs / "error.log", self.logs / "access.log"
        self._output = self.logs / "nginx.out"
        self._proc: subprocess.Popen | None = None
        self.port = 0
        self.url = ""
        self.pid = 0

    # the conf

    def _render(self, port: int) -> str:
        tls = auth = timeout = ""
        if self.tls is not None:
            cert, key = (Path(p).resolve() for p in self.tls)
            tls = f"        ssl_certificate {_quoted(cert)};\n        ssl_certificate_key {_quoted(key)};\n"
            if self.client_ca is not None:
                tls += (f"        ssl_client_certificate {_quoted(Path(self.client_ca).resolve())};\n"
                        "        ssl_verify_client on;\n")
        if self.token is not None:
            # if/return is the safe use of `if`; `=`/`!=` compare case-sensitively (a map would not)
            auth = ('            if ($http_authorization = "") {\n'
                    "                add_header WWW-Authenticate 'Bearer realm=\"tritonsuite\"' always;\n"
                    "                return 401;\n"
                    "            }\n"
                    f'            if ($http_authorization != "Bearer {self.token}") {{\n'
                    "                return 403;\n"
                    "            }\n")
        if self.read_timeout_s is not None:
            timeout = f"            proxy_read_timeout {max(1, round(self.read_timeout_s * 1000))}ms;\n"
        # as root nginx's workers drop to `nobody` (Debian's own conf says www-data), who cannot enter a test's 0700
        # tmp folder: request bodies past 16 KiB, buffered to tmp/client_body, would fail with 500
        user = "user root;\n" if os.geteuid() == 0 else ""
        return _CONF.format(user=user, upstream=self.upstream, port=port, ssl=" ssl" if self.tls else "", tls=tls,
                            auth=auth, timeout=timeout)

    def _write_conf(self, port: int) -> None:
        """0600 from the start: the token is never readable by others, even for a moment."""
        self.conf.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.conf.parent, 0o700)
        fd = os.open(self.conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, self._render(port).encode())
        finally:
            os.close(fd)

    # start and stop

    def __enter__(self) -> "Nginx":
        self.logs.mkdir(parents=True, exist_ok=True)
        (self.directory / "tmp").mkdir(exist_ok=True)
        try:
            for _ in range(TRIES):
                port = _free_port()
                if self._start(port):
                    self.port, self.url = port, f"127.0.0.1:{port}"
                    return self
            raise RuntimeError(f"nginx found no free port in {TRIES} tries:\n{self.tail()}")
        except BaseException:
            self._stop()
            raise

    def _start(self, port: int) -> bool:
        """True once ``port`` accepts and nginx has written its pid (after it bound); False when the port was
        taken meanwhile; RuntimeError for any other failure."""
        self._write_conf(port)
        pidfile = self.logs / "nginx.pid"
        pidfile.unlink(missing_ok=True)
        marks = {p: p.stat().st_size if p.exists() else 0 for p in (self.error_log, self._output)}
        with open(self._output, "ab") as out:
            self._proc = subprocess.Popen(
                [NGINX, "-p", f"{self.directory}/", "-c", str(self.conf), "-e", str(self.error_log),
                 "-g", "daemon off;"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = self._proc.pid
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                new = "".join(_read_from(p, at) for p, at in marks.items())
                self._reap()
                if "Address already in use" in new:
                    return False
                raise RuntimeError(f"nginx exited ({self._proc.returncode}) while starting:\n{self.tail()}")
            if _pid_in(pidfile) == self._proc.pid and _accepts(port):
                return True
            time.sleep(0.05)
        raise RuntimeError(f"nginx did not accept on 127.0.0.1:{port} within {READY_S:.0f} s:\n{self.tail()}")

    def __exit__(self, *exc) -> None:
        self._stop()

    def _stop(self) -> None:
        """SIGQUIT (nginx's graceful stop: the master stops and reaps its workers), SIGKILL to the whole group
        past STOP_S; either way nothing of this nginx is left, not even a zombie."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGQUIT)
                proc.wait(STOP_S)
            except subprocess.TimeoutExpired:
                self._kill()
        self._reap()
        if _group(proc.pid):  # workers left by a master that died on its own
            self._kill()

    def _kill(self) -> None:
        was = _subreaper(1)
        try:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._proc.wait(STOP_S)
            deadline = time.monotonic() + STOP_S
            while (left := _group(self._proc.pid)) and time.monotonic() < deadline:
                for pid in left:
                    try:
                        os.waitpid(pid, os.WNOHANG)
                    except ChildProcessError:  # not ours: someone else reaps it
                        pass
                time.sleep(0.02)
        finally:
            _subreaper(was)

    def _reap(self) -> None:
        """Bounded: the master is past its exit or killed by now."""
        if self._proc is not None:
            self._proc.wait(STOP_S)

    def leftovers(self) -> list[int]:
        """Pids of this nginx (master, workers) still present, zombies included: empty once the context exited."""
        return _group(self.pid) if self.pid else []

    def tail(self, lines: int = 20) -> str:
        """The end of the error log and of nginx's own output, for failure messages."""
        parts = []
        for path in (self.error_log, self._output):
            if path.exists():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(parts)


def _read_from(path: Path, offset: int) -> str:
    if not path.exists():
        return ""
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


def _pid_in(pidfile: Path) -> int | None:
    try:
        return int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False
