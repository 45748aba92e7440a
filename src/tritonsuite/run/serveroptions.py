"""How the server is started or reached, as options: declared once as argparse (and pytest's ``addoption``) takes
them, so the plugin and a script declare the same flags; resolved into :class:`tritonsuite.core.access.Access` by
:func:`access_from` (``--header`` and perf_analyzer's ``--ssl-*``) and into the launcher's settings by
:mod:`tritonsuite.run.options`."""
from __future__ import annotations

from tritonsuite.core.access import Access, AccessError, parse_header
from tritonsuite.run.checks import OptionError
from tritonsuite.server import LAUNCHERS

#: (flag, keyword arguments of argparse's add_argument / pytest's addoption)
SERVER_OPTIONS = (
    ("--server", dict(default="embedded", choices=sorted(LAUNCHERS),
        help="embedded: tritonserver from the nvidia-pytriton wheel; container: Triton in a Docker "
        "container (--image); remote: --triton-url")),
    ("--image", dict(default=None, help="--server container: the Triton image (default: $TRITONSUITE_IMAGE,"
        " else NGC's tritonserver:24.10-py3); tritonsuite-local:latest runs the wheel's tritonserver")),
    ("--gpus", dict(default="", help="--server container: GPUs for the container: all, none or device "
        "ids 0,1 (default: all for a GPU profile, none otherwise)")),
    ("--triton-url", dict(default="", help="host:port of a remote server's HTTP endpoint; "
        "https://host:port: through a TLS-terminating proxy in front of it (docs/servers.md)")),
    ("--triton-grpc-url", dict(default="", metavar="HOST:PORT", help="--server remote: host:port of its "
        "gRPC endpoint (for --protocol grpc and decoupled models' streams; not known otherwise)")),
    ("--triton-metrics-url", dict(default="", metavar="HOST:PORT", help="--server remote: host:port of its "
        "metrics endpoint (the conformance counters check reads it; skipped otherwise)")),
    # how the server is reached beyond host and port (tritonsuite.core.access): perf_analyzer's own option names
    ("--header", dict(action="append", default=[], metavar="NAME:VALUE", help="a header every request "
        "carries (perf_analyzer's -H; repeatable): a gateway's token, a restricted API's key; "
        "${VAR} in VALUE is read from the environment, so the secret need not be on the command line; "
        "values are redacted in everything the run writes")),
    ("--ssl-https-ca-certificates-file", dict(default="", metavar="FILE", help="https:// --triton-url: "
        "the CA certificates its certificate is verified against (default: the system's)")),
    ("--ssl-https-client-certificate-file", dict(default="", metavar="FILE", help="https:// "
        "--triton-url: a client certificate the proxy asks for")),
    ("--ssl-https-private-key-file", dict(default="", metavar="FILE", help="the client certificate's key")),
    ("--ssl-https-verify-peer", dict(type=int, default=1, choices=(0, 1), help="0: do not verify the "
        "proxy's certificate (every report page then says so; default 1)")),
    ("--ssl-https-verify-host", dict(type=int, default=2, choices=(0, 1, 2), help="0: do not check that "
        "the certificate names the host (every report page then says so; default 2)")),
    ("--ssl-grpc-use-ssl", dict(action="store_true", default=False, help="gRPC with Triton's own TLS "
        "(tritonserver --grpc-use-ssl)")),
    ("--ssl-grpc-root-certifications-file", dict(default="", metavar="FILE", help="--ssl-grpc-use-ssl: "
        "the root certificates the server's certificate is verified against")),
    ("--ssl-grpc-certificate-chain-file", dict(default="", metavar="FILE", help="--ssl-grpc-use-ssl: "
        "the client certificate, for mutual TLS (tritonserver --grpc-use-ssl-mutual)")),
    ("--ssl-grpc-private-key-file", dict(default="", metavar="FILE", help="the client certificate's key")),
    ("--backend-directory", dict(default=None, metavar="DIR", help="--server embedded or container: "
        "serve with the backends DIR holds (<name>/libtriton_<name>.so, e.g. an NGC image's "
        "/opt/tritonserver/backends); the python-based stand-ins serve only what DIR lacks")),
    ("--triton-server-flag", dict(action="append", default=[], metavar="NAME=VALUE",
        help="--server embedded or container: a tritonserver option for the server the suite starts "
        "(repeatable; Model Analyzer's triton_server_flags), e.g. rate-limit=execution_count")),
)


def access_from(opt) -> Access:
    """--header and --ssl-* as one :class:`~tritonsuite.core.access.Access`, checked (headers parsed, ${VAR}s read,
    files loaded): one line naming the bad value otherwise."""
    get = lambda name, default="": getattr(opt, name, default) or default  # noqa: E731 - a script's namespace
    try:
        access = Access(
            headers=tuple(parse_header(h) for h in get("header", [])),
            https=str(get("triton_url")).startswith("https://"),
            https_ca=get("ssl_https_ca_certificates_file"), https_client_cert=get("ssl_https_client_certificate_file"),
            https_client_key=get("ssl_https_private_key_file"),
            https_verify_peer=getattr(opt, "ssl_https_verify_peer", 1) != 0,
            https_verify_host=getattr(opt, "ssl_https_verify_host", 2) != 0,
            grpc_ssl=bool(get("ssl_grpc_use_ssl", False)), grpc_root_cert=get("ssl_grpc_root_certifications_file"),
            grpc_client_cert=get("ssl_grpc_certificate_chain_file"), grpc_client_key=get("ssl_grpc_private_key_file"))
        access.check()
    except AccessError as exc:
        raise OptionError(str(exc)) from None
    return access
