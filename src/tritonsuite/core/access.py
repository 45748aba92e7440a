"""How the suite reaches a server as a team's is really reached: TLS (Triton's own for gRPC; HTTPS through the
TLS-terminating proxy in front of its HTTP endpoint, which has none of its own), headers every request carries
(perf_analyzer's ``-H``: a gateway's token, Triton's restricted-API key), and the secrets among them kept out of
whatever a run writes or prints.

One :class:`Access` per server, carried by the server object; every way the suite talks to a server (the engine's
HTTP connections and gRPC channels, streams, tritonclient's control calls, the conformance probes, worker
processes, perf_analyzer's command line) takes what it needs from it. A leaf module: the standard library only
(ssl; grpc and tritonclient imported where they are asked for).

Secrets: a header's value is a :class:`Secret`, whose ``str`` and ``repr`` are ``<redacted>``; ``reveal()`` is
for the wire. Every secret made is also registered process-wide, so :func:`redact` takes them (and the contents of
private key files given) out of any text: the report and row writers, perf_analyzer's echoed command line and log,
and pytest's report of a test all pass through it.
"""
from __future__ import annotations

import functools
import os
import re
import ssl
from dataclasses import dataclass, field
from pathlib import Path

REDACTED = "<redacted>"
_SECRETS: set[str] = set()  # every secret value this process was given: redact() takes them out of text
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: the scheme word of an Authorization value; the credentials after it are redacted on their own too
_SCHEME = re.compile(r"^(Bearer|Basic|Token|ApiKey|Digest)\s+(?P<rest>\S.*)$", re.IGNORECASE)


class AccessError(ValueError):
    """A header, certificate or key that cannot be used: one line naming the option, the value and the valid
    choices."""


class Secret:
    """A value that must reach the server and nothing else: printed, formatted or repr'd, it is ``<redacted>``."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value
        remember(value)

    def reveal(self) -> str:
        return self._value

    def __str__(self) -> str:
        return REDACTED

    __repr__ = __str__

    def __eq__(self, other) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __reduce__(self):  # to worker processes and Ray actors: the value travels, and is registered there too
        return (Secret, (self._value,))


def remember(value: str) -> None:
    """Register a secret: :func:`redact` takes it (and, for an Authorization-style value, the credentials after
    its scheme word) out of any text from now on. Values under 4 characters are kept (they would redact words)."""
    value = value.strip()
    if len(value) >= 4:
        _SECRETS.add(value)
        if (m := _SCHEME.match(value)) and len(m["rest"]) >= 4:
            _SECRETS.add(m["rest"].strip())


def remember_key_file(path: str | Path) -> None:
    """Register a private key file's contents (the PEM as read, and each line of its base64 body)."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return
    remember(text)
    for line in text.splitlines():
        if not line.startswith("-----") and len(line.strip()) >= 16:
            _SECRETS.add(line.strip())


def redact(text: str) -> str:
    """``text`` with every registered secret replaced by ``<redacted>`` (longest first, so a secret that holds
    another goes whole)."""
    if not _SECRETS or not text:
        return text
    for secret in sorted(_SECRETS, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def secrets_known() -> bool:
    return bool(_SECRETS)


def parse_header(text: str, option: str = "--header", environ=None) -> tuple[str, Secret]:
    """``NAME:VALUE`` (perf_analyzer's ``-H``) into (name, value); ``${VAR}`` in the value is read from the
    environment (``environ``; default ``os.environ``), so a secret need not be on the command line."""
    environ = os.environ if environ is None else environ
    name, sep, value = str(text).partition(":")
    name, value = name.strip(), value.strip()
    if not sep or not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name) or not value:
        shown = f"{name}:{REDACTED}" if sep else REDACTED
        raise AccessError(f"{option} {shown!r}: expected NAME:VALUE with a header name of letters, digits and "
                          f"-_.; the value may read the environment: 'Authorization:Bearer ${{TRITON_TOKEN}}'")
    missing = [v for v in _ENV.findall(value) if v not in environ]
    if missing:
        raise AccessError(f"{option} {name}: the environment variable {missing[0]} it reads is not set; valid "
                          f"choices: export {missing[0]}, or give the value itself")
    resolved = _ENV.sub(lambda m: environ[m.group(1)], value)
    if "\r" in resolved or "\n" in resolved:
        raise AccessError(f"{option} {name}: its value holds a line break; valid choices: a one-line value")
    return name, Secret(resolved)


@dataclass(frozen=True)
class Access:
    """How a server is reached beyond host and port. Options named as perf_analyzer's (``--ssl-grpc-*``,
    ``--ssl-https-*``, ``-H``), so a team's perf_analyzer settings carry over.

    HTTPS (``https``): to a TLS-terminating proxy in front of Triton's HTTP endpoint; the certificate verified
    against ``https_ca`` (else the system's CAs) and the host name, unless ``https_verify_peer`` /
    ``https_verify_host`` are turned off (then every report says so); ``https_client_cert``/``_key`` where the
    proxy asks for one. gRPC (``grpc_ssl``): Triton's own TLS (``--grpc-use-ssl``), verified against
    ``grpc_root_cert`` (else gRPC's default roots); ``grpc_client_cert``/``_key`` for mutual TLS
    (``--grpc-use-ssl-mutual``). ``headers``: (name, value) on every request, every protocol."""

    headers: tuple[tuple[str, Secret], ...] = ()
    https: bool = False
    https_ca: str = ""
    https_client_cert: str = ""
    https_client_key: str = ""
    https_verify_peer: bool = True
    https_verify_host: bool = True
    grpc_ssl: bool = False
    grpc_root_cert: str = ""
    grpc_client_cert: str = ""
    grpc_client_key: str = ""
    _http_header_text: str = field(default="", init=False, repr=False, compare=False)

    def __post_init__(self):
        lines = "".join(f"{n}: {v.reveal()}\r\n" for n, v in self.headers)
        object.__setattr__(self, "_http_header_text", lines)
        for key in (self.https_client_key, self.grpc_client_key):
            if key:
                remember_key_file(key)

    # --- what each transport needs
    @property
    def http_scheme(self) -> str:
        return "https" if self.https else "http"

    def header_lines(self) -> str:
        """The headers as HTTP/1.1 lines (``Name: value\\r\\n`` each), for a request serialised by hand."""
        return self._http_header_text

    def header_dict(self) -> dict[str, str]:
        return {n: v.reveal() for n, v in self.headers}

    def grpc_metadata(self) -> tuple[tuple[str, str], ...]:
        """The headers as gRPC metadata (lower-case keys, as gRPC requires; Triton reads them case-insensitively)."""
        return tuple((n.lower(), v.reveal()) for n, v in self.headers)

    def http_ssl_context(self) -> ssl.SSLContext | None:
        """The client context of an HTTPS connection (None: plain HTTP): made once per access and shared by every
        connection (each would otherwise load the CA file again as it opens)."""
        return _http_context(self) if self.https else None

    def _configure(self, context) -> None:
        if not self.https_verify_host or not self.https_verify_peer:
            context.check_hostname = False
        if not self.https_verify_peer:
            context.verify_mode = ssl.CERT_NONE
        if self.https_client_cert:
            context.load_cert_chain(self.https_client_cert, self.https_client_key or None)

    def tritonclient_http(self) -> dict:
        """Keyword arguments of ``tritonclient.http.InferenceServerClient`` for this access (its headers are a
        plugin: :meth:`plugin`)."""
        if not self.https:
            return {}

        def factory(**_given):  # geventhttpclient's SSL pool asks for a context (and offers its own CA bundle)
            import gevent.ssl

            context = gevent.ssl.create_default_context(cafile=self.https_ca or None)
            self._configure(context)
            return context

        return {"ssl": True, "ssl_context_factory": factory,
                "insecure": not (self.https_verify_host and self.https_verify_peer)}

    def tritonclient_grpc(self) -> dict:
        """Keyword arguments of ``tritonclient.grpc.InferenceServerClient``."""
        if not self.grpc_ssl:
            return {}
        return {"ssl": True, "root_certificates": self.grpc_root_cert or None,
                "private_key": self.grpc_client_key or None, "certificate_chain": self.grpc_client_cert or None}

    def plugin(self, grpc: bool = False):
        """A tritonclient plugin that puts the headers on every call of the client it is registered with (None:
        no headers); ``grpc``: as metadata, whose keys gRPC takes in lower case only."""
        if not self.headers:
            return None
        from tritonclient._plugin import InferenceServerClientPlugin

        headers = dict(self.grpc_metadata()) if grpc else self.header_dict()

        class Headers(InferenceServerClientPlugin):
            def __call__(self, request):
                request.headers.update(headers)

        return Headers()

    def grpc_credentials(self):
        import grpc

        def read(path: str) -> bytes | None:
            return Path(path).read_bytes() if path else None

        return grpc.ssl_channel_credentials(read(self.grpc_root_cert), read(self.grpc_client_key),
                                            read(self.grpc_client_cert))

    def grpc_channel(self, url: str, options=(), aio: bool = True):
        """A gRPC channel to ``url``: with TLS where ``grpc_ssl``, else plain."""
        import grpc

        kind = grpc.aio if aio else grpc
        if self.grpc_ssl:
            return kind.secure_channel(url, self.grpc_credentials(), options=list(options))
        return kind.insecure_channel(url, options=list(options))

    # --- what a run says about it
    def perf_analyzer_args(self, protocol: str) -> list[str]:
        """perf_analyzer's own options for this access (the values revealed: for its argv only; show
        :func:`redact` of it)."""
        args = [a for n, v in self.headers for a in ("-H", f"{n}:{v.reveal()}")]
        if protocol == "grpc" and self.grpc_ssl:
            args.append("--ssl-grpc-use-ssl=true")
            for option, value in (("--ssl-grpc-root-certifications-file", self.grpc_root_cert),
                                  ("--ssl-grpc-private-key-file", self.grpc_client_key),
                                  ("--ssl-grpc-certificate-chain-file", self.grpc_client_cert)):
                if value:
                    args.append(f"{option}={value}")
        if protocol == "http" and self.https:
            args += [f"--ssl-https-verify-peer={int(self.https_verify_peer)}",
                     f"--ssl-https-verify-host={2 if self.https_verify_host else 0}"]
            for option, value in (("--ssl-https-ca-certificates-file", self.https_ca),
                                  ("--ssl-https-client-certificate-file", self.https_client_cert),
                                  ("--ssl-https-private-key-file", self.https_client_key)):
                if value:
                    args.append(f"{option}={value}")
        return args

    @property
    def unverified(self) -> str:
        """What verification is off, in words ("" when none is): every report page states it."""
        off = [o for o, on in (("--ssl-https-verify-peer 0", self.https_verify_peer),
                               ("--ssl-https-verify-host 0", self.https_verify_host)) if not on]
        if not self.https or not off:
            return ""
        return (f"HTTPS certificate verification turned OFF ({', '.join(off)}): the server's identity was not "
                f"checked")

    def describe(self) -> str:
        """One line for a report's header: "HTTPS (verified against ca.pem) · gRPC TLS, mutual · headers:
        Authorization (value redacted)"; "plain HTTP/gRPC" when nothing is set."""
        parts = []
        if self.https:
            parts.append(self.unverified or
                         f"HTTPS (certificate verified against {Path(self.https_ca).name or 'the system CAs'})")
        if self.grpc_ssl:
            parts.append(f"gRPC TLS{', mutual' if self.grpc_client_cert else ''} (verified against "
                         f"{Path(self.grpc_root_cert).name or 'the default roots'})")
        if self.headers:
            parts.append(f"headers: {', '.join(n for n, _ in self.headers)} (values redacted)")
        return " · ".join(parts) or "plain HTTP/gRPC, no headers"

    def check(self) -> None:
        """Each file given is readable and what it says it is (a context built from it): an :class:`AccessError`
        of one line naming the option, the file and what is wrong."""
        for option, path in (("--ssl-https-ca-certificates-file", self.https_ca),
                             ("--ssl-https-client-certificate-file", self.https_client_cert),
                             ("--ssl-https-private-key-file", self.https_client_key),
                             ("--ssl-grpc-root-certifications-file", self.grpc_root_cert),
                             ("--ssl-grpc-certificate-chain-file", self.grpc_client_cert),
                             ("--ssl-grpc-private-key-file", self.grpc_client_key)):
            if path and not Path(path).is_file():
                raise AccessError(f"{option} {path}: no such file")
        if bool(self.grpc_client_cert) != bool(self.grpc_client_key):
            raise AccessError("--ssl-grpc-certificate-chain-file and --ssl-grpc-private-key-file: mutual TLS needs "
                              "both (the client certificate and its key); valid choices: both, or neither")
        if self.https_client_key and not self.https_client_cert:
            raise AccessError("--ssl-https-private-key-file: needs --ssl-https-client-certificate-file beside it")
        if (self.https_ca or self.https_client_cert or not (self.https_verify_peer and self.https_verify_host)) \
                and not self.https:
            raise AccessError("--ssl-https-* options apply to an https:// --triton-url; valid choices: "
                              "--triton-url https://HOST:PORT, or leave them out")
        if not self.grpc_ssl and (self.grpc_root_cert or self.grpc_client_cert):
            raise AccessError("--ssl-grpc-* files apply with --ssl-grpc-use-ssl; valid choices: add it, or leave "
                              "them out")
        try:
            self.http_ssl_context()
        except (ssl.SSLError, OSError) as exc:
            raise AccessError(f"--ssl-https-*: the certificate files do not load ({exc})") from None
        for option, path in (("--ssl-grpc-root-certifications-file", self.grpc_root_cert),
                             ("--ssl-grpc-certificate-chain-file", self.grpc_client_cert)):
            if path and "-----BEGIN CERTIFICATE-----" not in Path(path).read_text(errors="replace"):
                raise AccessError(f"{option} {path}: not a PEM certificate")
        if self.grpc_client_key and "PRIVATE KEY-----" not in Path(self.grpc_client_key).read_text(errors="replace"):
            raise AccessError(f"--ssl-grpc-private-key-file {self.grpc_client_key}: not a PEM private key")


PLAIN = Access()


@functools.lru_cache(maxsize=16)
def _http_context(access: Access) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=access.https_ca or None)
    access._configure(context)
    return context
