"""How a broker proves to another that it is a broker of this cluster, on any listener (PLAINTEXT too).

The APIs only brokers send each other (follower fetches, WriteTxnMarkers) move high watermarks, keep
replicas in the ISR and commit or abort other producers' transactions, so they must come from a broker
of this cluster even where the listener authenticates nobody and there is no authorizer. The brokers share
the cluster secret; its ``"inter-broker"`` key (:func:`broker.cluster.keys.derive_key`) is the credential.

The login rides on SaslHandshake v1 and SaslAuthenticate with a mechanism of ours, :data:`MECHANISM`, that
no Kafka client negotiates; it comes after the listener's own login (TLS, SASL), whose principal stays the
one ACLs see. Two rounds, a challenge-response in both directions, so that nothing seen on the wire can
be replayed and the connecting broker learns that it reached a broker of its cluster too:

1. client-first: node id (int32), broker epoch (int64), a 32-byte nonce; server-first: the server's nonce;
2. client-final: HMAC-SHA256(key, "client" + client-first + server nonce); server-final: the same with
   "server".

The server checks the claimed broker is registered and unfenced at that epoch (the idea of KIP-903); the
request handlers check it again on every request, since the broker may be fenced after its login.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import struct
from collections.abc import Callable
from dataclasses import dataclass

MECHANISM = "BURROWPY-INTER-BROKER"

_CLIENT_FIRST = struct.Struct(">iq32s")
_NONCE_BYTES = 32


class BrokerLoginError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class BrokerIdentity:
    """A connection's proven broker: its node id and the broker epoch it logged in with."""

    node_id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class BrokerCredential:
    """What a broker logs in to another with."""

    node_id: int
    epoch: int
    key: bytes


def _proof(key: bytes, side: bytes, client_first: bytes, server_nonce: bytes) -> bytes:
    return hmac.new(key, side + client_first + server_nonce, hashlib.sha256).digest()


class BrokerLoginClient:
    """The connecting broker's side: :meth:`first`, :meth:`final`, then :meth:`verify`."""

    def __init__(self, credential: BrokerCredential) -> None:
        self.credential = credential
        self._client_first = _CLIENT_FIRST.pack(credential.node_id, credential.epoch,
                                                secrets.token_bytes(_NONCE_BYTES))
        self._server_nonce = b""

    def first(self) -> bytes:
        return self._client_first

    def final(self, server_first: bytes) -> bytes:
        if len(server_first) != _NONCE_BYTES:
            raise BrokerLoginError(f"the server's first message has {len(server_first)} bytes, not a nonce's")
        self._server_nonce = server_first
        return _proof(self.credential.key, b"client", self._client_first, server_first)

    def verify(self, server_final: bytes) -> None:
        expected = _proof(self.credential.key, b"server", self._client_first, self._server_nonce)
        if not hmac.compare_digest(server_final, expected):
            raise BrokerLoginError("the server's proof does not match: it is not a broker of this cluster "
                                   "(another cluster secret)")


class BrokerLoginServer:
    """The accepting broker's side: :meth:`first` answers client-first, :meth:`final` checks the proof.
    ``current_epoch(node_id)`` is the broker epoch of a registered, unfenced broker, else None."""

    def __init__(self, key: bytes, current_epoch: Callable[[int], int | None]) -> None:
        self._key = key
        self._current_epoch = current_epoch
        self._client_first = b""
        self._nonce = secrets.token_bytes(_NONCE_BYTES)
        self.identity: BrokerIdentity | None = None

    @property
    def started(self) -> bool:
        return bool(self._client_first)

    def first(self, client_first: bytes) -> bytes:
        if len(client_first) != _CLIENT_FIRST.size:
            raise BrokerLoginError(f"client-first has {len(client_first)} bytes, not {_CLIENT_FIRST.size}")
        self._client_first = bytes(client_first)
        return self._nonce

    def final(self, client_final: bytes) -> tuple[BrokerIdentity, bytes]:
        """The proven identity and the server-final message; BrokerLoginError if the proof or epoch fails."""
        if not hmac.compare_digest(bytes(client_final), _proof(self._key, b"client", self._client_first,
                                                               self._nonce)):
            raise BrokerLoginError("the proof does not match: not a broker of this cluster (another cluster "
                                   "secret)")
        node_id, epoch, _nonce = _CLIENT_FIRST.unpack(self._client_first)
        current = self._current_epoch(node_id)
        if current != epoch:
            state = "not a registered, unfenced broker" if current is None else f"at broker epoch {current}"
            raise BrokerLoginError(f"broker {node_id} logged in with broker epoch {epoch} but is {state}")
        self.identity = BrokerIdentity(node_id, epoch)
        return self.identity, _proof(self._key, b"server", self._client_first, self._nonce)
