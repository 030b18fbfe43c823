"""Keys for each use of the cluster secret, derived with HKDF-SHA256 (RFC 5869).

The operator configures one secret per cluster; each purpose (Raft's transport, gossip's packet MACs,
the inter-broker credential) gets a key of its own, so that a key that leaks from one use opens nothing
else, and no use sees the secret itself.
"""

from __future__ import annotations

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from broker.config_loading import is_placeholder

_SALT = b"burrowpy cluster secret v1"
# 32 characters: 128 bits even as hex, the least random-looking form a generated secret takes.
MIN_SECRET_LENGTH = 32
HOW_TO_MAKE_ONE = "python3 -c 'import secrets; print(secrets.token_hex(32))'"


def secret_problem(secret: str) -> str | None:
    """What makes ``secret`` unfit to be a cluster secret, or None. Anyone who has it can run code on every
    broker (pysyncobj unpickles Raft messages), so it must be one made at random for this cluster."""
    if is_placeholder(secret):
        return f"is the sample's placeholder: make a secret with {HOW_TO_MAKE_ONE} and give every broker of " \
               "the cluster the same one"
    if len(secret) < MIN_SECRET_LENGTH:
        return f"is {len(secret)} characters; a cluster secret needs at least {MIN_SECRET_LENGTH} (make one " \
               f"with {HOW_TO_MAKE_ONE})"
    return None


def derive_key(secret: str | bytes, purpose: str, length: int = 32) -> bytes:
    """The key for ``purpose`` (a short fixed label such as ``"gossip"``) from the cluster secret."""
    raw = secret.encode() if isinstance(secret, str) else secret
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=_SALT, info=purpose.encode()).derive(raw)
