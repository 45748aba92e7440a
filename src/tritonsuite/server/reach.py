"""Reaching a server as a team's is reached, and saying in one line what stood in the way: a certificate refused, a
proxy's 401/403/502/504, an API the server restricts (Triton's ``--http-restricted-api`` and
``--grpc-restricted-protocol``, which answer "This API is restricted, expecting header 'KEY'").

:func:`survey` asks each of Triton's API groups once, with the headers the run was given, and returns those the
server refuses; the run says them at its start, and a step that needs one is skipped with :func:`restricted_reason`
(which API, which flag, which header), never failed.
"""
from __future__ import annotations

import html
import json
import re
import ssl
import urllib.error
import urllib.request

from tritonsuite.core.access import PLAIN, Access, redact

#: Triton's answer to a call of a restricted API without the header it expects (HTTP 403; gRPC UNAVAILABLE, whose
#: header name carries the ``triton-grpc-protocol-`` prefix)
RESTRICTED = re.compile(r"This (API|protocol) is restricted, expecting header '([^']+)'")
GRPC_PREFIX = "triton-grpc-protocol-"
#: Triton's restricted-API groups and one harmless HTTP call of each (a model that does not exist: the restriction
#: is checked before the model is looked up, so a restricted group answers 403 and an open one 400/404)
PROBES = {
    "health": ("GET", "/v2/health/live"),
    "metadata": ("GET", "/v2"),
    "inference": ("POST", "/v2/models/tritonsuite-no-such-model/infer"),
    "model-config": ("GET", "/v2/models/tritonsuite-no-such-model/config"),
    "model-repository": ("POST", "/v2/repository/index"),
    "statistics": ("GET", "/v2/models/stats"),
    "shared-memory": ("GET", "/v2/systemsharedmemory/status"),
    "trace": ("GET", "/v2/trace/setting"),
    "logging": ("GET", "/v2/logging"),
}
PROXY_STATUS = {
    401: "the proxy asks for credentials",
    403: "the proxy refused the credentials given",
    407: "the proxy asks for proxy credentials",
    502: "the proxy could not reach the Triton behind it",
    503: "the proxy or the Triton behind it is unavailable",
    504: "the Triton behind the proxy did not answer the proxy in time",
}


def triton_error(body: bytes) -> bool:
    """Whether a body is Triton's own error answer (JSON with ``error``), not a proxy's page."""
    try:
        return isinstance(found := json.loads(body), dict) and "error" in found
    except ValueError:
        return False


def body_text(body: bytes) -> str:
    """A response body in one line: Triton's JSON ``error``, else an HTML page's title (a proxy's "401
    Authorization Required"), else its first 200 characters."""
    try:
        found = json.loads(body)
        if isinstance(found, dict) and "error" in found:
            return str(found["error"]).splitlines()[0] if found["error"] else ""
    except ValueError:
        pass
    text = body.decode(errors="replace")
    title = re.search(r"<title>(.*?)</title>", text, re.IGNORECASE | re.DOTALL)
    if title:
        return html.unescape(title.group(1)).strip()
    return " ".join(text.split())[:200]


def restricted_header(text: str) -> str | None:
    """The header a restricted API expects, from the server's answer; None when the answer is not that."""
    found = RESTRICTED.search(text or "")
    return found.group(2) if found else None


def status_problem(status: int, body: bytes, access: Access = PLAIN, where: str = "") -> str:
    """One line for an HTTP answer that is not the server's own: a restricted API, a proxy's refusal or gateway
    error; "" for any other (the server's own error, said by whoever asked)."""
    text = body_text(body)
    text = text if text.startswith(str(status)) else f"{status} {text}".rstrip()
    header = restricted_header(text)
    given = {n.lower() for n, _ in access.headers}
    at = f" at {where}" if where else ""
    if header:
        return (f"{text}{at}: the server restricts this API (tritonserver --http-restricted-api) and "
                f"{'refused the value of' if header.lower() in given else 'was not given'} header {header!r}; "
                f"valid choices: --header {header}:VALUE with the server's key")
    if status == 400 and not triton_error(body) and "certificate" in text.lower():  # nginx's ssl_verify_client
        return (f"{text}{at}: the proxy asks for a client certificate it trusts; valid choices: "
                f"--ssl-https-client-certificate-file and --ssl-https-private-key-file")
    if status in PROXY_STATUS and not triton_error(body):  # Triton's own 503 (a full queue) is the server's
        hint = ""
        if status in (401, 403):
            auth = [n for n, _ in access.headers if n.lower() in ("authorization", "proxy-authorization")]
            hint = (f" (header {auth[0]} was sent, its value refused)" if auth else
                    " (no Authorization header given; valid choices: --header 'Authorization:Bearer ${TOKEN}')")
        return f"{text}{at}: {PROXY_STATUS[status]}{hint}"
    return ""


def tls_problem(exc: BaseException, access: Access, where: str) -> str:
    """One line for a TLS handshake that failed: the certificate refused (expired, unknown CA, another host's) or
    no TLS spoken; "" when ``exc`` is not a TLS error."""
    if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException):
        exc = exc.reason
    if isinstance(exc, ssl.SSLCertVerificationError):
        ca = access.https_ca or "the system's CAs"
        return (f"{where}: its certificate was refused ({str(exc.verify_message or exc.reason).rstrip('.')}; "
                f"verified against "
                f"{ca}); valid choices: a certificate for this host signed by --ssl-https-ca-certificates-file, "
                f"or --ssl-https-verify-peer 0 (then every page says so)")
    if isinstance(exc, ssl.SSLError):
        return f"{where}: the TLS handshake failed ({exc.reason or exc}); is it an HTTPS endpoint?"
    return ""


def grpc_problem(url: str, access: Access, timeout_s: float, option: str = "--triton-grpc-url") -> str:
    """Why the gRPC endpoint at ``url`` cannot be used with ``access`` (Triton's TLS, mutual TLS, a restricted
    protocol), in one line; "" when ServerLive answers."""
    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc

    channel = access.grpc_channel(url, aio=False)
    try:
        service_pb2_grpc.GRPCInferenceServiceStub(channel).ServerLive(
            service_pb2.ServerLiveRequest(), timeout=timeout_s, metadata=access.grpc_metadata() or None)
        return ""
    except grpc.RpcError as exc:
        details = str(exc.details() or exc.code().name)
    finally:
        channel.close()
    where = f"{option} {url}"
    if header := restricted_header(details):
        return (f"{where}: the server restricts this protocol (tritonserver --grpc-restricted-protocol) to "
                f"requests with header {header!r}; valid choices: --header {header}:VALUE")
    verify = re.search(r"CERTIFICATE_VERIFY_FAILED: ([^:]+)", details)
    if verify:
        return (f"{where}: its certificate was refused ({verify.group(1).strip()}; verified against "
                f"{access.grpc_root_cert or 'the default roots'}); valid choices: a certificate for this host "
                f"signed by --ssl-grpc-root-certifications-file")
    if "Hostname Verification Check failed" in details:
        return (f"{where}: its certificate does not name this host (host name verification failed); valid "
                f"choices: a certificate whose subject alternative names hold the host of {url}")
    if "Socket closed" in details or "Tls handshake failed" in details:
        if not access.grpc_ssl:
            why = "it may speak TLS only (tritonserver --grpc-use-ssl): valid choices: --ssl-grpc-use-ssl"
        elif not access.grpc_client_cert:
            why = ("it may ask for a client certificate (tritonserver --grpc-use-ssl-mutual): valid choices: "
                   "--ssl-grpc-certificate-chain-file and --ssl-grpc-private-key-file")
        else:
            why = (f"it refused the client certificate {access.grpc_client_cert} (not signed by a CA it trusts), or "
                   f"it speaks no TLS")
        return f"{where}: the server closed the connection during the handshake; {why}"
    return f"{where}: not reachable within {timeout_s:g} s ({details.splitlines()[0][:200]})"


def get(server_url: str, method: str, path: str, access: Access, timeout_s: float) -> tuple[int, bytes]:
    """One call of the HTTP API (``server_url``: host:port), with the access's TLS and headers: (status, body);
    a refused TLS handshake or an unreachable host raises (urllib's errors)."""
    request = urllib.request.Request(f"{access.http_scheme}://{server_url}{path}", method=method,
                                     data=b"{}" if method == "POST" else None, headers=access.header_dict())
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=access.http_ssl_context()) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


_SURVEYED: dict[str, str] = {}  # the last survey's finding: restricted_reason names the API from it


def survey(server, timeout_s: float = 5.0) -> dict[str, str]:
    """The API groups the server refuses with the headers given: {group: the header it expects}. HTTP only (the
    gRPC side's groups are set apart with --grpc-restricted-protocol; a refused gRPC call says so itself)."""
    found = _SURVEYED
    found.clear()
    for group, (method, path) in PROBES.items():
        try:
            status, body = get(server.http_url, method, path, server.access, timeout_s)
        except (OSError, urllib.error.URLError):
            continue
        header = restricted_header(body_text(body)) if status == 403 else None
        if header:
            found[group] = header
    return dict(found)


def describe_restricted(found: dict[str, str]) -> str:
    """The run's line at its start: "restricted APIs (refused with the headers given): statistics, model-repository
    (header 'admin-key')"; "" when none is."""
    if not found:
        return ""
    by_header: dict[str, list[str]] = {}
    for group, header in found.items():
        by_header.setdefault(header, []).append(group)
    return "restricted APIs refused with the headers given: " + "; ".join(
        f"{', '.join(groups)} (header {header!r})" for header, groups in by_header.items())


def restricted_reason(text: str, found: dict[str, str] | None = None) -> str | None:
    """Why a step was skipped, where ``text`` (its error) is a restricted API's refusal: which API (from the
    survey's ``found``), which flag and which header; None when it is not one."""
    header = restricted_header(text)
    if header is None:
        return None
    grpc = header.startswith(GRPC_PREFIX)
    groups = sorted(g for g, h in (_SURVEYED if found is None else found).items()
                    if h == header or GRPC_PREFIX + h == header)
    flag = "--grpc-restricted-protocol" if grpc else "--http-restricted-api"
    which = f"the {', '.join(groups)} API" if groups else "an API"
    return redact(f"needs {which}, which the server restricts (tritonserver {flag}) to requests with header "
                  f"{header!r}: not given or not accepted; valid choices: --header {header}:VALUE")
