"""The twin's certificates, service-account key pair and kubeconfigs.

One self-signed CA signs the API server's serving certificate (loopback and the
``kubernetes.default`` names) and a client certificate per user: the admin
(``system:masters``), ``system:kube-controller-manager`` and ``system:kube-scheduler``, which
the API server's default RBAC bootstrap policy already grants what those components need.
The service-account key pair signs and verifies tokens. Keys are EC P-256 (fast to make:
the whole set takes well under a second) from Python's ``cryptography``, which the project's
virtual environment already has.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# user name -> organisation (group); the names are those RBAC's bootstrap roles bind.
CLIENTS = {
    "admin": ("kubernetes-admin", "system:masters"),
    "controller-manager": ("system:kube-controller-manager", None),
    "scheduler": ("system:kube-scheduler", None),
}
SERVER_NAMES = ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"]
SERVER_IPS = ["127.0.0.1", "10.0.0.1"]


def _name(common: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _cert(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
    extensions: list[tuple[x509.ExtensionType, bool]],
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    issuer_name, issuer_key = issuer if issuer else (subject, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=30))
    )
    for ext, critical in extensions:
        builder = builder.add_extension(ext, critical=critical)
    return builder.sign(issuer_key, hashes.SHA256())


def _leaf(
    pki: Path,
    stem: str,
    subject: x509.Name,
    ca: tuple[x509.Name, ec.EllipticCurvePrivateKey],
    server: bool,
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    exts: list[tuple[x509.ExtensionType, bool]] = [
        (x509.BasicConstraints(ca=False, path_length=None), True),
        (x509.ExtendedKeyUsage([usage]), False),
    ]
    if server:
        sans: list[x509.GeneralName] = [x509.DNSName(n) for n in SERVER_NAMES]
        sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in SERVER_IPS]
        exts.append((x509.SubjectAlternativeName(sans), False))
    cert = _cert(subject, key, ca, exts)
    (pki / f"{stem}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(pki / f"{stem}.key", key)


def make_pki(pki: Path) -> None:
    """Write the CA, the serving and client certificates and the service-account keys."""
    pki.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("railplan-k8s-twin-ca")
    ca_cert = _cert(
        ca_name, ca_key, None, [(x509.BasicConstraints(ca=True, path_length=None), True)]
    )
    (pki / "ca.crt").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(pki / "ca.key", ca_key)
    _leaf(pki, "apiserver", _name("kube-apiserver"), (ca_name, ca_key), server=True)
    for stem, (user, group) in CLIENTS.items():
        _leaf(pki, stem, _name(user, group), (ca_name, ca_key), server=False)
    sa_key = ec.generate_private_key(ec.SECP256R1())
    _write_key(pki / "sa.key", sa_key)
    (pki / "sa.pub").write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def kubeconfig(pki: Path, client: str, server: str) -> str:
    """A kubeconfig for `client` (a key of `CLIENTS`) with its certificate embedded."""
    user = CLIENTS[client][0]
    return f"""apiVersion: v1
kind: Config
clusters:
- name: twin
  cluster:
    server: {server}
    certificate-authority-data: {_b64(pki / "ca.crt")}
users:
- name: {user}
  user:
    client-certificate-data: {_b64(pki / f"{client}.crt")}
    client-key-data: {_b64(pki / f"{client}.key")}
contexts:
- name: twin
  context: {{cluster: twin, user: {user}}}
current-context: twin
"""
