"""TLS material from Kafka's PEM settings (KIP-651): read through the Disk seam and
checked before anything is served, so that a missing, unreadable or mismatched key
stops the broker at startup with ``<setting>: <problem>``, never a plaintext fallback."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from epochlog.seams import Disk, Tls
from epochlog.settings.registry import SettingError

Lookup = Callable[[str], object]
# (the setting that holds it, the secret)
Secret = tuple[str, str]


def read_pem(disk: Disk, setting: str, path: str) -> bytes:
    """A PEM file's bytes, or a refusal naming the setting that points at it."""
    try:
        return disk.read_file(path)
    except OSError as exc:
        raise SettingError(setting, f"cannot read {path}: {exc.strerror or exc}") from None


def certificates(setting: str, pem: bytes) -> list[x509.Certificate]:
    """Every certificate of a PEM text; at least one."""
    try:
        found = x509.load_pem_x509_certificates(pem)
    except ValueError as exc:
        raise SettingError(setting, f"no PEM certificate could be read: {exc}") from None
    return found


def check_key_pair(
    chain_setting: str, chain: bytes, key_setting: str, key: bytes, password: Secret
) -> None:
    """The key decrypts with the password and belongs to the chain's first certificate."""
    leaf = certificates(chain_setting, chain)[0]
    password_setting, secret = password
    try:
        private = serialization.load_pem_private_key(key, secret.encode() or None)
    except TypeError as exc:  # encrypted without a password, or a password for a plain key
        raise SettingError(password_setting, str(exc)) from None
    except ValueError as exc:
        if secret:
            raise SettingError(password_setting, f"cannot decrypt the key: {exc}") from None
        raise SettingError(key_setting, f"no PEM private key could be read: {exc}") from None
    if _public(private.public_key()) != _public(leaf.public_key()):
        raise SettingError(
            key_setting, f"the key does not belong to the certificate in {chain_setting}"
        )


def _public(key: object) -> bytes:
    return key.public_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _pem_blocks(pem: bytes, marker: bytes) -> bytes:
    """The PEM blocks of one kind (``CERTIFICATE``, ``PRIVATE KEY``...) in a text."""
    out, inside = [], False
    for line in pem.splitlines(keepends=True):
        if line.startswith(b"-----BEGIN ") and marker in line:
            inside = True
        if inside:
            out.append(line)
        if line.startswith(b"-----END ") and marker in line:
            inside = False
    return b"".join(out)


def keystore(get: Lookup, name: Callable[[str], str], disk: Disk) -> tuple[bytes, bytes]:
    """(certificate chain, private key) from ssl.keystore.location (one PEM file with
    both) or ssl.keystore.certificate.chain + ssl.keystore.key; empty when neither."""
    location = str(get("ssl.keystore.location"))
    inline_chain = str(get("ssl.keystore.certificate.chain"))
    inline_key = str(get("ssl.keystore.key"))
    password = str(get("ssl.key.password"))
    if location and (inline_chain or inline_key):
        raise SettingError(
            name("ssl.keystore.location"),
            "set either it or ssl.keystore.certificate.chain and ssl.keystore.key, not both",
        )
    if location:
        pem = read_pem(disk, name("ssl.keystore.location"), location)
        chain, key = _pem_blocks(pem, b"CERTIFICATE"), _pem_blocks(pem, b"PRIVATE KEY")
        where = name("ssl.keystore.location")
        if not key:
            raise SettingError(where, f"{location} holds no PEM private key")
        check_key_pair(where, chain, where, key, (name("ssl.key.password"), password))
        return chain, key
    if bool(inline_chain) != bool(inline_key):
        missing = "ssl.keystore.key" if inline_chain else "ssl.keystore.certificate.chain"
        raise SettingError(name(missing), "required with its pair")
    if inline_chain:
        chain, key = inline_chain.encode(), inline_key.encode()
        check_key_pair(
            name("ssl.keystore.certificate.chain"),
            chain,
            name("ssl.keystore.key"),
            key,
            (name("ssl.key.password"), password),
        )
        return chain, key
    return b"", b""


def truststore(get: Lookup, name: Callable[[str], str], disk: Disk) -> bytes:
    """The trusted CA certificates (PEM) from ssl.truststore.location or
    ssl.truststore.certificates; empty when neither is set."""
    location = str(get("ssl.truststore.location"))
    inline = str(get("ssl.truststore.certificates"))
    if location and inline:
        raise SettingError(
            name("ssl.truststore.location"),
            "set either it or ssl.truststore.certificates, not both",
        )
    if location:
        pem = read_pem(disk, name("ssl.truststore.location"), location)
        certificates(name("ssl.truststore.location"), pem)
        return pem
    if inline:
        certificates(name("ssl.truststore.certificates"), inline.encode())
        return inline.encode()
    return b""


def listener_tls(
    listener: str,
    settings: Mapping[str, object],
    overrides: Mapping[str, object],
    disk: Disk,
) -> Tls:
    """The server side of an SSL listener: its keystore is required; a truststore too
    when client certificates are asked for (there is nothing else to check them by)."""

    def name(setting: str) -> str:
        return f"listener.name.{listener.lower()}.{setting}" if setting in overrides else setting

    def get(setting: str) -> object:
        return overrides[setting] if setting in overrides else settings[setting]

    chain, key = keystore(get, name, disk)
    if not chain:
        raise SettingError(
            name("ssl.keystore.location"),
            f"listener {listener} is SSL and needs a keystore (or "
            "ssl.keystore.certificate.chain and ssl.keystore.key)",
        )
    trusted = truststore(get, name, disk)
    client_auth = str(get("ssl.client.auth")).lower()
    if client_auth != "none" and not trusted:
        raise SettingError(
            name("ssl.truststore.location"),
            f"ssl.client.auth={client_auth} on listener {listener} needs the CA certificates "
            "that client certificates are checked against",
        )
    return Tls(
        certificate_chain=chain,
        private_key=key,
        key_password=str(get("ssl.key.password")),
        trusted=trusted,
        client_auth=client_auth,
        protocols=tuple(get("ssl.enabled.protocols")),  # type: ignore[arg-type]
    )


def inter_broker_tls(server: Tls, check_hostname: bool) -> Tls:
    """The client side of a broker's connections to the inter-broker listener of the
    others: their certificates are checked against the same truststore (the system's
    when none is set), their names too unless ssl.endpoint.identification.algorithm is
    empty, and its own keystore is presented as its client certificate."""
    return Tls(
        certificate_chain=server.certificate_chain,
        private_key=server.private_key,
        key_password=server.key_password,
        trusted=server.trusted,
        check_hostname=check_hostname,
        protocols=server.protocols,
    )
