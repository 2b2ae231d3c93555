"""Certificates for a throwaway control plane: a CA, the apiserver's serving cert, client certs, SA keys."""

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=30)
PrivateKey = ec.EllipticCurvePrivateKey


def _new_key() -> PrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    return x509.Name([*attributes, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


@dataclass(frozen=True)
class CertPair:
    """A certificate and its key, written as PEM files."""

    cert: Path
    key: Path


class Authority:
    """A certificate authority that issues serving and client certificates into one folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._key = _new_key()
        now = datetime.datetime.now(datetime.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(_name("trainingjob-test-ca"))
            .issuer_name(_name("trainingjob-test-ca"))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.cert = folder / "ca.crt"
        self.cert.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(
        self,
        file_stem: str,
        common_name: str,
        organizations: tuple[str, ...] = (),
        *,
        server: bool = False,
        addresses: tuple[str, ...] = (),
        loopback: bool = True,
    ) -> CertPair:
        """Issue a client certificate (or, with server=True, a serving certificate for the apiserver's names,
        `addresses` and, unless loopback=False, localhost and 127.0.0.1)."""
        key = _new_key()
        now = datetime.datetime.now(datetime.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, organizations))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if server:
            dns = ["kubernetes", "kubernetes.default", "kubernetes.default.svc"] + (["localhost"] if loopback else [])
            ips = ["10.0.0.1", *addresses] + (["127.0.0.1"] if loopback else [])
            names: list[x509.GeneralName] = [x509.DNSName(name) for name in dns]
            names += [x509.IPAddress(ipaddress.ip_address(address)) for address in ips]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        pair = CertPair(self.folder / f"{file_stem}.crt", self.folder / f"{file_stem}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pair.key.write_bytes(_key_pem(key))
        pair.key.chmod(0o600)
        return pair


def service_account_keys(folder: Path) -> CertPair:
    """A key pair for signing ServiceAccount tokens: `cert` holds the public key, `key` the private key."""
    key = _new_key()
    pair = CertPair(folder / "sa.pub", folder / "sa.key")
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    pair.cert.write_bytes(public)
    pair.key.write_bytes(_key_pem(key))
    pair.key.chmod(0o600)
    return pair
