"""Certificates made by the test itself (the ``cryptography`` package), so TLS tests need no files checked in that
expire one day and no network: a CA, server and client certificates it signed, and the bad ones a client must refuse
(expired, for another host, from another CA). EC P-256 keys: fast to make. Keys are unencrypted PEM, mode 0600."""
from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("cryptography", reason="no cryptography, which the TLS tests make their certificates with "
                    "(pip install -e '.[test]')")
from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID  # noqa: E402

CLIENT_CN = "tritonsuite-test-client"
WRONG_HOST = "not-this-host.invalid"


@dataclass(frozen=True)
class Pki:
    """The files :func:`make_pki` wrote; ``ca`` signed server, client, expired and wrong_host, ``other_ca`` signed
    only other_client (a CA the server or the client does not trust)."""

    directory: Path
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    expired_cert: Path
    expired_key: Path
    wrong_host_cert: Path
    wrong_host_key: Path
    other_ca: Path
    other_client_cert: Path
    other_client_key: Path


@dataclass(frozen=True)
class _Ca:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "tritonsuite tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _ca(cn: str, now: datetime.datetime) -> _Ca:
    """A self-signed root with the extensions a strict verifier (Python 3.13's VERIFY_X509_STRICT) asks for."""
    key = _key()
    cert = (x509.CertificateBuilder()
            .subject_name(_name(cn)).issuer_name(_name(cn))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return _Ca(key, cert)


def _leaf(ca: _Ca, cn: str, usage: x509.ObjectIdentifier, names: list[x509.GeneralName] | None,
          not_before: datetime.datetime, not_after: datetime.datetime
          ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    ski = ca.cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    builder = (x509.CertificateBuilder()
               .subject_name(_name(cn)).issuer_name(ca.cert.subject)
               .public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(not_before).not_valid_after(not_after)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                            crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
               .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False))
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(ca.key, hashes.SHA256()), key


def _write_cert(path: Path, cert: x509.Certificate) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> Path:
    """Created 0600 from the start (not chmod-ed after): a key is never readable by others, even for a moment."""
    data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an existing file keeps its mode through O_CREAT
        os.write(fd, data)
    finally:
        os.close(fd)
    return path


def make_pki(directory: Path) -> Pki:
    """Writes a fresh PKI into ``directory`` (created if missing). Server certificates name IP 127.0.0.1 and DNS
    localhost, as the servers under test bind only to 127.0.0.1; valid from an hour ago for a day (the expired one:
    two days ago to yesterday)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    before, after = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=1)
    here = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    server, client = ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH

    ca, other = _ca("tritonsuite test CA", now), _ca("tritonsuite other CA", now)
    made = {
        "server": _leaf(ca, "localhost", server, here, before, after),
        "client": _leaf(ca, CLIENT_CN, client, None, before, after),
        "expired": _leaf(ca, "localhost", server, here, now - datetime.timedelta(days=2),
                         now - datetime.timedelta(days=1)),
        "wrong_host": _leaf(ca, WRONG_HOST, server, [x509.DNSName(WRONG_HOST)], before, after),
        "other_client": _leaf(other, CLIENT_CN, client, None, before, after),
    }
    files = {}
    for name, (cert, key) in made.items():
        files[f"{name}_cert"] = _write_cert(directory / f"{name}.crt", cert)
        files[f"{name}_key"] = _write_key(directory / f"{name}.key", key)
    return Pki(directory=directory, ca=_write_cert(directory / "ca.crt", ca.cert),
               other_ca=_write_cert(directory / "other_ca.crt", other.cert), **files)
