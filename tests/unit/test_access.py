"""How a server is reached (tritonsuite.core.access) and what stood in the way (tritonsuite.server.reach): headers
from the environment, secrets that print as <redacted>, the one-line answers to a proxy's refusals and a restricted
API, each case made to happen."""
from __future__ import annotations

import pickle

import pytest

from tritonsuite.core import access as access_module
from tritonsuite.core.access import REDACTED, Access, AccessError, Secret, parse_header, redact, remember_key_file
from tritonsuite.run.verdicts import judged, PASSED
from tritonsuite.server.reach import body_text, describe_restricted, restricted_reason, status_problem


@pytest.fixture(autouse=True)
def forgotten():
    """The secrets these tests register are forgotten after each: other tests' reports are not redacted for them."""
    before = set(access_module._SECRETS)
    yield
    access_module._SECRETS.intersection_update(before)


def test_a_header_value_is_read_from_the_environment_and_never_printed():
    name, value = parse_header("Authorization:Bearer ${TS_TEST_TOKEN}", environ={"TS_TEST_TOKEN": "tok-1234567"})
    assert name == "Authorization" and value.reveal() == "Bearer tok-1234567"
    assert str(value) == repr(value) == REDACTED and "tok-1234567" not in f"{value} {value!r} {[value]}"
    access = Access(headers=((name, value),))
    assert "tok-1234567" not in repr(access) and "tok-1234567" not in access.describe()
    assert access.header_lines() == "Authorization: Bearer tok-1234567\r\n"
    assert access.grpc_metadata() == (("authorization", "Bearer tok-1234567"),)
    # registered: any text a run writes loses it, and the credentials after the scheme word on their own too
    assert redact("sent Bearer tok-1234567 and tok-1234567") == f"sent {REDACTED} and {REDACTED}"
    # it travels to worker processes whole, and is registered there as here
    assert pickle.loads(pickle.dumps(value)).reveal() == "Bearer tok-1234567"


@pytest.mark.parametrize("given, expected", [
    ("Authorization:Bearer ${TS_NOT_SET_ANYWHERE}", "the environment variable TS_NOT_SET_ANYWHERE it reads is not set"),
    ("no-colon-here", "expected NAME:VALUE"),
    ("bad name:value", "expected NAME:VALUE"),
    ("X-Key:", "expected NAME:VALUE"),
])
def test_a_bad_header_is_one_line_naming_it_and_not_its_value(given, expected):
    with pytest.raises(AccessError) as caught:
        parse_header(given, environ={})
    text = str(caught.value)
    assert expected in text and "\n" not in text and text.startswith("--header")
    assert "value" not in given or "value'" not in text  # the value given is not echoed


def test_a_key_file_given_is_redacted_wherever_it_appears(tmp_path):
    body = "MHcCAQEEIB3fakefakefakefakefakefakefakefakefakefakeoAoGCCqGSM49"
    key = tmp_path / "client.key"
    key.write_text(f"-----BEGIN EC PRIVATE KEY-----\n{body}\n-----END EC PRIVATE KEY-----\n")
    remember_key_file(key)
    assert redact(f"log: {body}") == f"log: {REDACTED}" and redact(key.read_text()) == f"{REDACTED}\n"


def test_options_that_cannot_go_together_are_one_line_each(tmp_path):
    cert = tmp_path / "c.pem"
    cert.write_text("-----BEGIN CERTIFICATE-----\nMII\n-----END CERTIFICATE-----\n")
    cases = [
        (Access(grpc_ssl=True, grpc_client_cert=str(cert)), "mutual TLS needs both"),
        (Access(https_verify_peer=False), "apply to an https:// --triton-url"),
        (Access(grpc_root_cert=str(cert)), "apply with --ssl-grpc-use-ssl"),
        (Access(https=True, https_ca=str(tmp_path / "missing.pem")), "missing.pem: no such file"),
        (Access(grpc_ssl=True, grpc_root_cert=str(tmp_path / "c.pem"), grpc_client_cert=str(cert),
                grpc_client_key=str(cert)), "not a PEM private key"),
    ]
    for access, expected in cases:
        with pytest.raises(AccessError, match=expected):
            access.check()


def test_verification_turned_off_is_said_and_given_to_perf_analyzer_alike():
    access = Access(https=True, https_verify_peer=False, headers=(("X-Key", Secret("k-998877")),))
    assert "verification turned OFF (--ssl-https-verify-peer 0)" in access.unverified
    assert access.describe().startswith("HTTPS certificate verification turned OFF")
    args = access.perf_analyzer_args("http")
    assert "--ssl-https-verify-peer=0" in args and args[:2] == ["-H", "X-Key:k-998877"]
    assert Access(https=True).unverified == "" and "verified against the system CAs" in Access(https=True).describe()
    grpc = Access(grpc_ssl=True, grpc_root_cert="/ca.pem", grpc_client_cert="/c.pem", grpc_client_key="/k.pem")
    assert grpc.perf_analyzer_args("grpc") == ["--ssl-grpc-use-ssl=true", "--ssl-grpc-root-certifications-file=/ca.pem",
                                               "--ssl-grpc-private-key-file=/k.pem",
                                               "--ssl-grpc-certificate-chain-file=/c.pem"]
    assert grpc.perf_analyzer_args("http") == [] and "gRPC TLS, mutual" in grpc.describe()


NGINX_401 = (b"<html>\r\n<head><title>401 Authorization Required</title></head>\r\n<body>\r\n<center><h1>401 "
             b"Authorization Required</h1></center>\r\n<hr><center>nginx/1.22.1</center>\r\n</body>\r\n</html>\r\n")
RESTRICTED = b'{"error":"This API is restricted, expecting header \'admin-key\'"}'


def test_a_proxy_answer_is_said_as_the_proxy_s_and_the_server_s_own_is_left_to_its_caller():
    assert body_text(NGINX_401) == "401 Authorization Required"
    bare = status_problem(401, NGINX_401, Access())
    assert bare.startswith("401 Authorization Required: the proxy asks for credentials (no Authorization header")
    sent = status_problem(403, b"<title>403 Forbidden</title>", Access(headers=(("Authorization", Secret("x1x1x1")),)))
    assert "refused the credentials given (header Authorization was sent, its value refused)" in sent
    assert "could not reach the Triton behind it" in status_problem(502, b"<title>502 Bad Gateway</title>")
    assert "did not answer the proxy in time" in status_problem(504, b"<title>504 Gateway Time-out</title>")
    # Triton's own 503 (a full queue) and 400 are the server's answers: not a proxy's
    assert status_problem(503, b'{"error":"Exceeds maximum queue size"}') == ""
    assert status_problem(400, b'{"error":"unexpected shape"}') == ""


def test_a_restricted_api_is_named_with_its_flag_and_header_and_skips_the_step():
    line = status_problem(403, RESTRICTED, Access())
    assert "the server restricts this API (tritonserver --http-restricted-api) and was not given header " \
           "'admin-key'; valid choices: --header admin-key:VALUE" in line
    found = {"statistics": "admin-key", "model-repository": "admin-key"}
    assert describe_restricted(found) == ("restricted APIs refused with the headers given: statistics, "
                                          "model-repository (header 'admin-key')")
    why = restricted_reason("GET /v2/models/m/stats answered " + line, found)
    assert why.startswith("needs the model-repository, statistics API, which the server restricts "
                          "(tritonserver --http-restricted-api) to requests with header 'admin-key'")
    grpc = restricted_reason("[StatusCode.UNAVAILABLE] This protocol is restricted, expecting header "
                             "'triton-grpc-protocol-admin-key'", found)
    assert "(tritonserver --grpc-restricted-protocol)" in grpc and "--header triton-grpc-protocol-admin-key:" in grpc
    assert restricted_reason("inference request failed with HTTP 400: bad shape", found) is None

    def refused():
        raise RuntimeError(f"GET /v2/models/m/stats answered {line}")

    verdict = judged("offline[m]", refused, lambda r: PASSED, lambda r: {})
    assert verdict.outcome == "skipped" and verdict.line.startswith("offline[m]: needs ")

    def broken():
        raise RuntimeError("something else")

    with pytest.raises(RuntimeError, match="something else"):  # any other error is not turned into a skip
        judged("offline[m]", broken, lambda r: PASSED, lambda r: {})
