"""SASL on one connection (KIP-152, KIP-368), without I/O: which requests a connection
may send before it has authenticated, the handshake, each mechanism's exchange (PLAIN,
and SCRAM-SHA-256/512 through ``scramp``), the principal it ends with and when its
session expires. The connection loop and the SaslHandshake/SaslAuthenticate handlers
drive it; a failure is answered, then the connection is closed, as Kafka does."""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from scramp import ScramMechanism
from scramp.core import Nonce

from epochlog.protocol.errors import ErrorCode
from epochlog.security.scram_credentials import MECHANISMS as SCRAM_MECHANISMS
from epochlog.security.scram_credentials import ScramCredential
from epochlog.settings.security import PLAIN

SUPPORTED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
# ApiVersions, SaslHandshake, SaslAuthenticate: all a client may send before it has
# authenticated (Kafka's SaslServerAuthenticator); anything else closes the connection.
_API_VERSIONS, _SASL_HANDSHAKE, _SASL_AUTHENTICATE = 18, 17, 36
BEFORE_AUTHENTICATION = frozenset({_API_VERSIONS, _SASL_HANDSHAKE, _SASL_AUTHENTICATE})
_INVALID_CREDENTIALS = "Authentication failed: Invalid username or password"

Lookup = Callable[[str, str], ScramCredential | None]


class SaslRefused(Exception):
    """A request the connection's SASL state does not allow: close the connection."""


@dataclass(frozen=True)
class SaslServerConfig:
    """One SASL listener's mechanisms and credentials, and KIP-368's session bound."""

    listener: str
    enabled: tuple[str, ...]
    plain_users: Mapping[str, str]
    scram_lookup: Lookup
    # connections.max.reauth.ms (0: sessions never expire), sasl.server.max.receive.size.
    reauth_ms: int
    max_receive_size: int

    def authenticator(self) -> SaslAuthenticator:
        return SaslAuthenticator(self)


@dataclass(frozen=True)
class AuthenticateResult:
    error: ErrorCode
    message: str | None
    reply: bytes
    session_lifetime_ms: int = 0


class _Plain:
    """RFC 4616: ``[authzid] NUL user NUL password`` in one token."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users

    def step(self, token: bytes) -> tuple[bytes, str | None]:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise ValueError("Invalid SASL/PLAIN request: expected 3 tokens")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise ValueError("Invalid SASL/PLAIN request: not UTF-8") from None
        if not user or not password:
            raise ValueError("Authentication failed: username or password not specified")
        if authzid and authzid != user:
            raise ValueError("Authentication failed: Client requested an authorization id "
                             "that is different from username")  # fmt: skip
        expected = self._users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise ValueError(_INVALID_CREDENTIALS)
        return b"", user


class _Scram:
    """RFC 5802 server side through scramp: client-first, then client-final."""

    def __init__(self, mechanism: str, lookup: Lookup) -> None:
        self._mechanism = mechanism
        self._lookup = lookup
        self._user = ""
        self._server = ScramMechanism(mechanism).make_server(self._auth_info)
        self._first = True

    def _auth_info(self, user: str) -> tuple[bytes, bytes, bytes, int] | None:
        self._user = user  # (scramp has undone SCRAM's =2C and =3D escapes)
        credential = self._lookup(self._mechanism, self._user)
        if credential is None:
            return None
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def _accept_prefixed_nonce(self, client_final: str) -> None:
        """Kafka's server accepts a client-final nonce that *ends with* the nonce it
        sent (ScramSaslServer), and librdkafka 2.0 (Debian's kcat) sends its own nonce
        before it; the proof still covers the message as sent, so nothing is weakened."""
        for attribute in client_final.split(","):
            if attribute.startswith("r="):
                nonce = attribute[2:]
                if nonce != self._server.nonce and nonce.endswith(str(self._server.nonce)):
                    self._server.nonce = Nonce(nonce)
                return

    def step(self, token: bytes) -> tuple[bytes, str | None]:
        try:
            text = token.decode("utf-8")
            if self._first:
                self._first = False
                self._server.set_client_first(text)
                return self._server.get_server_first().encode(), None
            self._accept_prefixed_nonce(text)
            self._server.set_client_final(text)
            return self._server.get_server_final().encode(), self._user
        except Exception as exc:  # scramp raises ScramException, malformed input others
            raise ValueError(
                "Authentication failed during authentication due to invalid credentials "
                f"with SASL mechanism {self._mechanism}"
            ) from exc


@dataclass
class SaslAuthenticator:
    """One connection's SASL state: awaiting a handshake, mid-exchange, authenticated
    (until its session expires, when ``connections.max.reauth.ms`` is set), or failed."""

    config: SaslServerConfig
    principal: str | None = None
    mechanism: str | None = None
    # Why the exchange failed (the connection is closed once that is answered).
    failure: str | None = None
    # A v0 SaslHandshake: the tokens that follow come raw, without a request header.
    raw_tokens: bool = False
    expires_at_ms: int | None = None
    # Completed exchanges: more than one means the client re-authenticated (KIP-368).
    authentications: int = 0
    _exchange: _Plain | _Scram | None = field(default=None, repr=False)

    @property
    def failed(self) -> bool:
        return self.failure is not None

    def _fail(self, error: ErrorCode, reason: str) -> ErrorCode:
        self.failure = reason
        self._exchange = None
        return error

    @property
    def authenticated(self) -> bool:
        return self.principal is not None and self._exchange is None

    def admit(self, api_key: int, now_ms: int) -> None:
        """May this request be handled now? SaslRefused (close the connection) if not.
        An expired session is closed whatever comes, a handshake too (as Kafka's
        SocketServer does): re-authentication must begin before the session ends."""
        expired = self.expires_at_ms is not None and now_ms >= self.expires_at_ms
        if expired and self._exchange is None:
            raise SaslRefused(
                f"the SASL session of {self.principal} expired (connections.max.reauth.ms="
                f"{self.config.reauth_ms}) and was not re-authenticated"
            )
        if api_key in BEFORE_AUTHENTICATION:
            return
        if self.principal is None or self._exchange is not None:
            raise SaslRefused(
                f"request (API key {api_key}) before SASL authentication completed on "
                f"listener {self.config.listener}"
            )

    def max_frame(self) -> int | None:
        """``sasl.server.max.receive.size`` bounds every frame until authentication."""
        return None if self.authenticated else self.config.max_receive_size

    def handshake(self, mechanism: str, version: int) -> ErrorCode:
        """SaslHandshake: the mechanism the exchange will use. A new handshake on an
        authenticated connection starts a re-authentication (KIP-368), with the same
        mechanism only."""
        if self._exchange is not None:
            return self._fail(ErrorCode.ILLEGAL_SASL_STATE, "SaslHandshake during an exchange")
        if mechanism not in self.config.enabled:
            return self._fail(
                ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                f"unsupported SASL mechanism {mechanism!r} (enabled: "
                f"{', '.join(self.config.enabled)})",
            )
        if self.principal is not None and mechanism != self.mechanism:
            return self._fail(
                ErrorCode.ILLEGAL_SASL_STATE,
                f"re-authentication with {mechanism} instead of {self.mechanism}",
            )
        self.mechanism = mechanism
        self.raw_tokens = version == 0
        self._exchange = (
            _Plain(self.config.plain_users)
            if mechanism == PLAIN
            else _Scram(mechanism, self.config.scram_lookup)
        )
        return ErrorCode.NONE

    def authenticate(self, token: bytes, now_ms: int) -> AuthenticateResult:
        """One SaslAuthenticate (or raw) token: the reply, and once the exchange is
        done the principal and the session's lifetime."""
        exchange = self._exchange
        if exchange is None:
            message = "SaslAuthenticate before SaslHandshake"
            return AuthenticateResult(
                self._fail(ErrorCode.ILLEGAL_SASL_STATE, message), message, b""
            )
        try:
            reply, user = exchange.step(token)
        except ValueError as exc:
            error = self._fail(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc))
            return AuthenticateResult(error, str(exc), b"")
        if user is None:
            return AuthenticateResult(ErrorCode.NONE, None, reply)
        self._exchange = None
        self.raw_tokens = False
        principal = f"User:{user}"
        if self.principal is not None and principal != self.principal:
            message = (
                f"Cannot change principals during re-authentication from {self.principal} "
                f"to {principal}"
            )
            error = self._fail(ErrorCode.SASL_AUTHENTICATION_FAILED, message)
            return AuthenticateResult(error, message, b"")
        self.principal = principal
        self.authentications += 1
        lifetime = self.config.reauth_ms
        self.expires_at_ms = now_ms + lifetime if lifetime > 0 else None
        return AuthenticateResult(ErrorCode.NONE, None, reply, lifetime)
