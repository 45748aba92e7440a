"""The engine's HTTP/1.1 connection (tritonsuite.load.http.Connection) against a server on loopback that answers as
proxies and servers in front of Triton do: Content-Length or chunked bodies, ``Connection: close`` after a number
of requests (nginx's ``keepalive_requests``), an idle connection closed, a connection dropped mid-response."""
from __future__ import annotations

import asyncio

import pytest

from tritonsuite.load.http import Connection
from tritonsuite.load.interrupt import run


async def _serve(behaviour, handler_log: list):
    """A loopback HTTP/1.1 server: ``behaviour(n, writer)`` answers the connection's n-th request (from 1)."""

    async def handle(reader, writer):
        handler_log.append("connection")
        n = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                n += 1
                if not await behaviour(n, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def _answer(body: bytes, close: bool = False, extra: bytes = b"") -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n" + extra
            + (b"Connection: close\r\n" if close else b"") + b"Content-Length: %d\r\n\r\n" % len(body) + body)


def _request(i: int) -> bytes:
    body = b"%d" % i
    return b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body


def _exchange(behaviour, count: int, between=None):
    """Send ``count`` requests in turn on one Connection; (responses, connections the server saw, reopened)."""
    log: list = []

    async def main():
        server, port = await _serve(behaviour, log)
        async with server:
            conn = await Connection("127.0.0.1", port).open()
            got = []
            try:
                for i in range(count):
                    got.append((await conn.roundtrip(_request(i)))[1])
                    if between is not None:
                        await between(i)
            finally:
                conn.close()
            return got, conn.reopened

    got, reopened = run(main())
    return got, log.count("connection"), reopened


def test_keep_alive_serves_every_request_on_one_connection():
    async def behaviour(n, writer):
        writer.write(_answer(b"answer %d" % n, extra=b"Inference-Header-Content-Length: 3\r\n"))
        return True

    got, connections, reopened = _exchange(behaviour, 5)
    assert [r.body for r in got] == [b"answer %d" % n for n in range(1, 6)]
    assert {(r.status, r.header_length, r.keep_alive) for r in got} == {(200, 3, True)}
    assert connections == 1 and reopened == 0


def test_connection_close_after_a_number_of_requests_opens_another():
    """nginx's keepalive_requests: the 3rd response of each connection says Connection: close and the server closes
    it; every request is still answered, on a new connection each 3."""

    async def behaviour(n, writer):
        writer.write(_answer(b"ok", close=n == 3))
        await writer.drain()
        return n < 3

    got, connections, reopened = _exchange(behaviour, 10)
    assert [r.body for r in got] == [b"ok"] * 10
    assert [r.keep_alive for r in got] == [n % 3 != 0 for n in range(1, 11)]
    assert connections == 4 and reopened == 3


def test_a_connection_ended_after_every_response_serves_every_request():
    """The closing connection's loss reaches the client while its successor is opening or already in use: it is
    the old connection's, and fails nothing on the new one."""

    async def behaviour(n, writer):
        writer.write(_answer(b"ok", close=True))
        await writer.drain()
        return False

    got, connections, reopened = _exchange(behaviour, 200)
    assert [r.body for r in got] == [b"ok"] * 200 and connections == 200 and reopened == 199


def test_an_idle_connection_closed_by_the_server_is_opened_again():
    """A server (or load balancer) that closes a keep-alive connection while it is idle: the next request opens
    another instead of failing."""

    async def behaviour(n, writer):
        writer.write(_answer(b"ok"))
        await writer.drain()
        return False  # closes after each response, without saying so

    async def pause(i):
        await asyncio.sleep(0.05)  # the close reaches the client before the next request

    got, connections, reopened = _exchange(behaviour, 3, between=pause)
    assert [r.body for r in got] == [b"ok"] * 3 and connections == 3 and reopened == 2


def test_a_request_sent_as_the_server_closed_the_idle_connection_is_sent_again_on_a_new_one():
    """The close and the next request cross: on a connection that served before, lost before any byte of the
    response, the request goes once more on a new connection (as curl does)."""

    async def behaviour(n, writer):
        if n == 2:  # the next request came as the server closed the connection: read, never answered
            return False
        writer.write(_answer(b"ok"))
        return True

    got, connections, reopened = _exchange(behaviour, 4)
    assert [r.body for r in got] == [b"ok"] * 4 and connections == 4 and reopened == 3


def test_a_first_request_lost_on_a_new_connection_is_not_sent_again():
    async def behaviour(n, writer):
        return False  # read, never answered

    with pytest.raises(ConnectionError, match="closed before the response"):
        _exchange(behaviour, 1)


def test_a_chunked_body_is_read_whole():
    async def behaviour(n, writer):
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n3\r\nefg\r\n0\r\n\r\n")
        return True

    got, _, _ = _exchange(behaviour, 2)
    assert [r.body for r in got] == [b"abcdefg"] * 2


def test_a_response_split_across_reads_is_one_response():
    async def behaviour(n, writer):
        data = _answer(b"x" * 100_000)
        for i in range(0, len(data), 7_000):
            writer.write(data[i:i + 7_000])
            await writer.drain()
            await asyncio.sleep(0)
        return True

    got, _, _ = _exchange(behaviour, 3)
    assert [len(r.body) for r in got] == [100_000] * 3


def test_a_connection_dropped_mid_response_fails_that_request_with_why():
    async def behaviour(n, writer):
        writer.write(_answer(b"x" * 100)[:60])
        await writer.drain()
        return False

    with pytest.raises(ConnectionError, match=r"connection to 127\.0\.0\.1:\d+ closed before the response"):
        _exchange(behaviour, 1)


def test_a_response_that_is_not_http_fails_with_why():
    async def behaviour(n, writer):
        writer.write(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
        await writer.drain()
        return True

    with pytest.raises(Exception, match=r"unreadable HTTP response from 127\.0\.0\.1:\d+"):
        _exchange(behaviour, 1)
