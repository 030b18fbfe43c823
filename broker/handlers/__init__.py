"""API handlers, one module per API family; importing this package registers them all."""

from broker.handlers import acls, admin, cluster_info, fetch, groups, produce, transactions  # noqa: F401  (registration)
from broker.handlers.registry import HANDLERS, RequestContext, handler

__all__ = ["HANDLERS", "RequestContext", "handler"]
