"""The test-support proxy (tests/proxy.py) and PKI (tests/tls.py) do what the TLS and auth tests will lean on: nginx
in front of a tiny HTTP/1.1 upstream, checked with the standard library's clients only, so a failure here is the
helpers' and not a client library's."""
from __future__ import annotations

import http.client
import http.server
import contextlib
import socket
import ssl
import threading
import time
from pathlib import Path

import pytest

from tests import proxy as proxy_module
from tests.proxy import NGINX, WHY_NOT, Nginx
from tests.tls import make_pki

pytestmark = pytest.mark.skipif(NGINX is None, reason=WHY_NOT)

BODY = b"hello from upstream\n"
TOKEN = "s3cret-Token_for.tests~only"
SLEEP_S = 3.0


class _Upstream(http.server.ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins the handlers: none outlives the test
    connections: set
    requests: int
    stop: threading.Event

    def handle_error(self, request, client_address):  # a peer gone mid-answer (the 504 test's nginx) is expected
        pass


class _Handler(http.server.BaseHTTPRequestHandler):
    """GET: BODY; POST: the body echoed; /sleep: answers after SLEEP_S (or at teardown). HTTP/1.1 keep-alive."""

    protocol_version = "HTTP/1.1"
    timeout = 10  # an idle keep-alive connection (nginx's to us) is dropped, not waited on forever
    disable_nagle_algorithm = True  # headers and body are two writes: with Nagle, each answer waits out nginx's
    # delayed ACK (40 ms: the 1001 requests took 44 s)

    def _answer(self, body: bytes) -> None:
        self.server.connections.add(self.client_address)
        self.server.requests += 1
        if self.path.startswith("/sleep"):
            self.server.stop.wait(SLEEP_S)
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self._answer(BODY)

    def do_POST(self):
        self._answer(self.rfile.read(int(self.headers.get("Content-Length", 0))))

    def log_message(self, *args):
        pass


@pytest.fixture
def upstream():
    server = _Upstream(("127.0.0.1", 0), _Handler)
    server.connections, server.requests, server.stop = set(), 0, threading.Event()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stop.set()
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def _addr(server) -> str:
    return f"127.0.0.1:{server.server_address[1]}"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _proxy(directory: Path, upstream: str, **kw):
    """Nginx, then the check every test makes: nothing of it is left once the context exited."""
    p = Nginx(directory, upstream, **kw)
    with p:
        assert p.leftovers(), "nginx's processes are seen while it runs"
        yield p
    assert p.leftovers() == []


def _get(p: Nginx, path: str = "/", headers: dict | None = None, context: ssl.SSLContext | None = None):
    host, port = p.url.split(":")
    conn = (http.client.HTTPSConnection(host, int(port), context=context, timeout=10) if context
            else http.client.HTTPConnection(host, int(port), timeout=10))
    try:
        conn.request("GET", path, headers=headers or {})
        r = conn.getresponse()
        return r.status, r.read(), r
    finally:
        conn.close()


def test_plain_proxy_answers_large_bodies_both_ways(tmp_path, upstream):
    with _proxy(tmp_path / "proxy", _addr(upstream)) as p:
        assert _get(p)[:2] == (200, BODY)
        big = bytes(range(256)) * (6 * 4096)  # 6 MiB: buffered to tmp/client_body, which nginx's worker must write
        conn = http.client.HTTPConnection("127.0.0.1", p.port, timeout=20)
        try:
            conn.request("POST", "/", body=big)
            r = conn.getresponse()
            assert (r.status, r.read() == big) == (200, True)
        finally:
            conn.close()
        assert oct(p.conf.stat().st_mode & 0o777) == "0o600"


def test_keepalive_closed_after_1000_requests_and_upstream_connections_reused(tmp_path, upstream):
    with _proxy(tmp_path / "proxy", _addr(upstream)) as p:
        conn = http.client.HTTPConnection("127.0.0.1", p.port, timeout=10)
        try:
            first, closes = None, []
            for i in range(1, 1002):
                conn.request("GET", "/")
                r = conn.getresponse()
                assert (r.status, r.read()) == (200, BODY)
                if (r.getheader("Connection") or "").lower() == "close":
                    closes.append(i)
                first = first or conn.sock
                if i < 1000:
                    assert conn.sock is first
            assert closes == [1000]
            assert conn.sock is not None and conn.sock is not first  # the 1001st went on a new connection
        finally:
            conn.close()
    assert upstream.requests == 1001
    assert len(upstream.connections) <= 2  # nginx's upstream keepalive: not one connection a request


def test_tls_verified_against_the_ca(tmp_path, upstream, pki):
    with _proxy(tmp_path / "proxy", _addr(upstream), tls=(pki.server_cert, pki.server_key)) as p:
        status, body, r = _get(p, context=ssl.create_default_context(cafile=pki.ca))
        assert (status, body, r.version) == (200, BODY, 11)


@pytest.mark.parametrize("case, message", [("other_ca", "unable to get local issuer certificate"),
                                           ("expired", "expired"),
                                           ("wrong_host", "IP address mismatch")])
def test_tls_refused(tmp_path, upstream, pki, case, message):
    cert, key = {"other_ca": (pki.server_cert, pki.server_key), "expired": (pki.expired_cert, pki.expired_key),
                 "wrong_host": (pki.wrong_host_cert, pki.wrong_host_key)}[case]
    trusted = pki.other_ca if case == "other_ca" else pki.ca
    with _proxy(tmp_path / "proxy", _addr(upstream), tls=(cert, key)) as p:
        with pytest.raises(ssl.SSLCertVerificationError) as refused:
            _get(p, context=ssl.create_default_context(cafile=trusted))
    assert message in refused.value.verify_message
    assert upstream.requests == 0


def test_mutual_tls(tmp_path, upstream, pki):
    """client_ca (beyond the brief's API): the PKI's client certificates, accepted and refused by nginx (HTTP 400
    after the handshake, nginx's way)."""
    with _proxy(tmp_path / "proxy", _addr(upstream), tls=(pki.server_cert, pki.server_key), client_ca=pki.ca) as p:
        def client(cert=None, key=None):
            context = ssl.create_default_context(cafile=pki.ca)
            if cert:
                context.load_cert_chain(cert, key)
            return _get(p, context=context)[:2]

        assert client(pki.client_cert, pki.client_key) == (200, BODY)
        status, body = client()
        assert status == 400 and b"No required SSL certificate was sent" in body
        status, body = client(pki.other_client_cert, pki.other_client_key)
        assert status == 400 and b"The SSL certificate error" in body
    assert upstream.requests == 1


def test_token(tmp_path, upstream):
    with _proxy(tmp_path / "proxy", _addr(upstream), token=TOKEN) as p:
        status, _, r = _get(p)
        assert status == 401 and r.getheader("WWW-Authenticate", "").startswith("Bearer")
        assert _get(p, headers={"Authorization": "Bearer wrong"})[0] == 403
        assert _get(p, headers={"Authorization": f"bearer {TOKEN.upper()}"})[0] == 403  # compared case-sensitively
        assert _get(p, headers={"Authorization": f"Bearer {TOKEN}"})[:2] == (200, BODY)
    assert upstream.requests == 1
    assert TOKEN in p.conf.read_text()  # by design: the conf is apart (conf/), the logs are searched
    logs = sorted(p.logs.iterdir())
    assert p.access_log in logs and p.error_log in logs
    assert p.access_log.read_text().count("\n") == 4
    for path in logs:
        assert TOKEN not in path.read_text(errors="replace"), path


def test_502_when_upstream_refuses(tmp_path):
    with _proxy(tmp_path / "proxy", f"127.0.0.1:{_closed_port()}") as p:
        assert _get(p)[0] == 502


def test_504_when_upstream_is_slow(tmp_path, upstream):
    with _proxy(tmp_path / "proxy", _addr(upstream), read_timeout_s=1) as p:
        started = time.monotonic()
        assert _get(p, "/sleep")[0] == 504
        assert 0.9 < time.monotonic() - started < SLEEP_S


def test_port_taken_then_another_tried(tmp_path, upstream, monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = [taken.getsockname()[1]]
        real = proxy_module._free_port
        monkeypatch.setattr(proxy_module, "_free_port", lambda: ports.pop() if ports else real())
        with _proxy(tmp_path / "proxy", _addr(upstream)) as p:
            assert p.port != taken.getsockname()[1]
            assert _get(p)[:2] == (200, BODY)
        assert "Address already in use" in p.error_log.read_text()


def test_start_failure_raises_with_the_log(tmp_path, upstream, pki):
    with pytest.raises(RuntimeError, match="cannot load certificate") as failed:
        with Nginx(tmp_path / "proxy", _addr(upstream), tls=(tmp_path / "missing.crt", pki.server_key)):
            pass
    assert "missing.crt" in str(failed.value)


def test_stuck_master_killed_with_its_workers(tmp_path, upstream, monkeypatch):
    """A master that ignores SIGQUIT (stopped here) is SIGKILL-ed with its workers, and they are reaped."""
    monkeypatch.setattr(proxy_module, "STOP_S", 0.5)
    with _proxy(tmp_path / "proxy", _addr(upstream)) as p:
        assert len(p.leftovers()) == 2  # master and its one worker
        proxy_module.os.kill(p.pid, proxy_module.signal.SIGSTOP)
    assert p._proc.returncode == -proxy_module.signal.SIGKILL
