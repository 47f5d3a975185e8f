"""Who sent a request and through which listener (Kafka's RequestContext): Metadata
answers with that listener's endpoints, and the authorizer judges the principal.
On a SASL listener the principal is ``User:ANONYMOUS`` until the SASL exchange
(``authentication``) names the user."""

from __future__ import annotations

from dataclasses import dataclass

from epochlog.seams import Connection
from epochlog.security.listeners import Listener
from epochlog.security.principal import ANONYMOUS, PrincipalMapper, subject_name
from epochlog.security.sasl import SaslAuthenticator, SaslServerConfig


class AuthenticationFailed(Exception):
    """The peer's identity cannot be established: its connection is closed."""


@dataclass(frozen=True)
class Session:
    listener: str
    security_protocol: str
    principal: str
    peer: str
    # The connection's SASL state on a SASL listener (what the SASL handlers drive).
    authentication: SaslAuthenticator | None = None


def open_session(
    conn: Connection,
    listener: Listener,
    mapper: PrincipalMapper,
    sasl: SaslServerConfig | None = None,
) -> Session:
    """The session of a new connection on ``listener``: a verified client certificate's
    subject, mapped by ``ssl.principal.mapping.rules``, else ``User:ANONYMOUS``; on a
    SASL listener, anonymous until the client authenticates."""
    principal = ANONYMOUS
    if sasl is not None:
        return Session(
            listener.name, listener.security_protocol, principal, conn.peer, sasl.authenticator()
        )
    if conn.peer_certificate is not None:
        subject = subject_name(conn.peer_certificate)
        mapped = mapper.principal(subject)
        if mapped is None:
            raise AuthenticationFailed(
                f"no ssl.principal.mapping.rules rule matches the certificate subject {subject!r}"
            )
        principal = mapped
    return Session(listener.name, listener.security_protocol, principal, conn.peer)
