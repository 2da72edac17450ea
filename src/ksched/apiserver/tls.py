"""A self-signed serving certificate (cryptography): ``ksched serve`` off loopback, the webhook,
and the secure port of ``ksched run`` and ``ksched dispatch``."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from pathlib import Path

__all__ = ["make_self_signed", "server_ssl_context"]


def make_self_signed(directory: str | Path, hosts: list[str], *, common_name: str = "ksched-apiserver",
                     cert_name: str = "tls.crt", key_name: str = "tls.key") -> tuple[Path, Path]:
    """Write ``tls.crt`` and ``tls.key`` (EC P-256, one year) for ``hosts`` into ``directory``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    sans: list[x509.GeneralName] = []
    for h in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    crt_path = d / cert_name
    key_path = d / key_name
    crt_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    return crt_path, key_path


def server_ssl_context(cert: str | Path, key: str | Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(str(cert), str(key))
    return ctx
