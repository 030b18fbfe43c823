"""API handlers, one module per API family; importing this package registers them all."""

from broker.handlers import (  # noqa: F401  (registration)
    acls,
    admin,
    cluster_info,
    fetch,
    groups,
    leadership,
    observability,
    produce,
    quotas,
    reassignment,
    transactions,
)
from broker.handlers.registry import HANDLERS, RequestContext, handler

__all__ = ["HANDLERS", "RequestContext", "handler"]
