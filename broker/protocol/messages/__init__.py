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
    observability,
    offsets,
    produce,
    sasl,
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
)

REQUESTS: dict[int, Message] = {m.api_key: m for m in _API_MESSAGES if m.kind == "request"}
RESPONSES: dict[int, Message] = {m.api_key: m for m in _API_MESSAGES if m.kind == "response"}
DATA_STRUCTS: dict[str, Message] = {m.name: m for m in (*consumer_protocol.MESSAGES, *consumer_offsets.MESSAGES,
                                                               *transactions.DATA)}
