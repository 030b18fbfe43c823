"""Keys for each use of the cluster secret, derived with HKDF-SHA256 (RFC 5869).

The operator configures one secret per cluster; each purpose (Raft's transport, gossip's packet MACs,
the inter-broker credential) gets a key of its own, so that a key that leaks from one use opens nothing
else, and no use sees the secret itself.
"""

from __future__ import annotations

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

_SALT = b"burrowpy cluster secret v1"


def derive_key(secret: str | bytes, purpose: str, length: int = 32) -> bytes:
    """The key for ``purpose`` (a short fixed label such as ``"gossip"``) from the cluster secret."""
    raw = secret.encode() if isinstance(secret, str) else secret
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=_SALT, info=purpose.encode()).derive(raw)
