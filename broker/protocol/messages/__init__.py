"""Every schema the codec knows, as data, one module per API family.

``REQUESTS`` and ``RESPONSES`` map api_key to the body schema; ``DATA_STRUCTS`` maps a struct name
("OffsetCommitValue", "ConsumerProtocolAssignment", ...) to its schema.
"""

from broker.protocol.messages import (
    acls,
    admin,
    cluster,
    consumer_offsets,
    consumer_protocol,
    fetch,
    groups,
    leadership,
    observability,
    offsets,
    produce,
    sasl,
    share_groups,
    transactions,
)
from broker.protocol.schema import Message

_API_MESSAGES: tuple[Message, ...] = (
    *cluster.MESSAGES,
    *produce.MESSAGES,
    *fetch.MESSAGES,
    *admin.MESSAGES,
    *acls.MESSAGES,
    *groups.MESSAGES,
    *offsets.MESSAGES,
    *sasl.MESSAGES,
    *transactions.MESSAGES,
    *observability.MESSAGES,
    *leadership.MESSAGES,
    *share_groups.MESSAGES,
)



def _by_api_key(kind: str) -> dict[int, Message]:
    by_key: dict[int, Message] = {}
    for message in _API_MESSAGES:
        if message.kind == kind:
            assert message.api_key is not None  # Message's validation gives every request and response one
            by_key[message.api_key] = message
    return by_key


REQUESTS = _by_api_key("request")
RESPONSES = _by_api_key("response")
DATA_STRUCTS: dict[str, Message] = {m.name: m for m in (*consumer_protocol.MESSAGES, *consumer_offsets.MESSAGES,
                                                               *transactions.DATA)}
