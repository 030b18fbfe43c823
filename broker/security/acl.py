"""Kafka's ACLs and its StandardAuthorizer's decisions, on a single broker.

An ACL says that a principal (``User:alice``, ``User:*`` for everyone) from a host (an IP address, ``*``
for any) is allowed or denied an operation on a resource pattern: a resource type (topic, group, cluster,
transactional id) with a LITERAL name (``*`` matching every name) or a PREFIXED one. The rules are
Kafka's:

* ``super.users`` (``User:admin;User:CN=broker``) may do anything;
* any matching DENY wins; else any matching ALLOW grants, where an ALLOW of READ, WRITE, DELETE or ALTER
  also grants DESCRIBE and an ALLOW of ALTER_CONFIGS grants DESCRIBE_CONFIGS (a DENY implies nothing but
  itself; ALL stands for every operation, either way);
* a resource that some ACL names (for anybody) is denied to those no ACL allows; a resource no ACL names
  at all is allowed only with ``allow.everyone.if.no.acl.found``.

The principal of a connection is Kafka's default one: ``User:<SASL user>`` on SASL listeners,
``User:<certificate subject>`` (RFC 2253, as Java prints it) for a TLS client with a certificate, else
``User:ANONYMOUS``. ACLs are created and deleted with CreateAcls/DeleteAcls (``kafka-acls.sh``, the
AdminClient) and kept in ``<data dir>/acls.json``, written atomically.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from enum import IntEnum
from pathlib import Path
from typing import NamedTuple

from broker.log.background import write_later, written
from broker.log.files import keep_private

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
STORE_FILE = "acls.json"
ANONYMOUS = "User:ANONYMOUS"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# What an ALLOW of one operation grants besides itself (Kafka's implied operations).
_IMPLIED_BY = {
    Operation.DESCRIBE: {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER},
    Operation.DESCRIBE_CONFIGS: {Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS},
}

# The operations each resource type knows (Kafka's supported operations), for the authorized-operations
# bit fields of Metadata, DescribeCluster, DescribeGroups and ConsumerGroupDescribe.
RESOURCE_OPERATIONS = {
    ResourceType.TOPIC: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE, Operation.ALTER,
                         Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    ResourceType.GROUP: (Operation.READ, Operation.DELETE, Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS,
                         Operation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (Operation.CREATE, Operation.ALTER, Operation.DESCRIBE, Operation.CLUSTER_ACTION,
                           Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE),
}


class AclError(ValueError):
    """An ACL or filter Kafka refuses with INVALID_REQUEST; the message is Kafka's."""


class Acl(NamedTuple):
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def describe(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={Operation(self.operation).name}, "
                f"permissionType={Permission(self.permission).name}) on {ResourceType(self.resource_type).name}:"
                f"{PatternType(self.pattern_type).name}:{self.resource_name}")


def parse_principal(text: str) -> tuple[str, str]:
    """``Type:name`` -> (type, name), as Kafka parses a principal; AclError if there is no type."""
    kind, sep, name = text.partition(":")
    if not sep or not kind:
        raise AclError(f"Could not parse principal from `{text}` (no colon is present separating the principal "
                       "type from the principal name)")
    return kind, name


def validate_new(acl: Acl) -> None:
    """Kafka's checks of an ACL to create (its controller's, in its words)."""
    if _name(ResourceType, acl.resource_type) in ("UNKNOWN", "ANY"):
        raise AclError(f"Invalid resourceType {_name(ResourceType, acl.resource_type)}")
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclError(f"Invalid patternType {_name(PatternType, acl.pattern_type)}")
    if _name(Operation, acl.operation) in ("UNKNOWN", "ANY"):
        raise AclError(f"Invalid operation {_name(Operation, acl.operation)}")
    if acl.permission not in (Permission.ALLOW, Permission.DENY):
        raise AclError(f"Invalid permissionType {_name(Permission, acl.permission)}")
    if not acl.resource_name:
        raise AclError("Resource name should not be empty")
    parse_principal(acl.principal)


def _name(kind: type[IntEnum], value: int) -> str:
    return kind(value).name if value in kind._value2member_map_ else "UNKNOWN"


class AclFilter(NamedTuple):
    """What DescribeAcls and DeleteAcls match: ANY / None fields match everything."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def validate(self) -> None:
        if "UNKNOWN" in (_name(ResourceType, self.resource_type), _name(PatternType, self.pattern_type)):
            raise AclError("Unknown patternFilter.")
        if "UNKNOWN" in (_name(Operation, self.operation), _name(Permission, self.permission)):
            raise AclError("Unknown entryFilter.")

    def matches(self, acl: Acl) -> bool:
        if self.resource_type != ResourceType.ANY and acl.resource_type != self.resource_type:
            return False
        if not self._pattern_matches(acl):
            return False
        if self.principal is not None and acl.principal != self.principal:
            return False
        if self.host is not None and acl.host != self.host:
            return False
        if self.operation != Operation.ANY and acl.operation != self.operation:
            return False
        return self.permission == Permission.ANY or acl.permission == self.permission

    def _pattern_matches(self, acl: Acl) -> bool:
        name = self.resource_name
        if self.pattern_type == PatternType.MATCH:
            # every ACL that would apply to the literal resource ``name``
            if name is None:
                return True
            if acl.pattern_type == PatternType.LITERAL:
                return acl.resource_name in (name, WILDCARD)
            return name.startswith(acl.resource_name)
        if self.pattern_type != PatternType.ANY and acl.pattern_type != self.pattern_type:
            return False
        return name is None or acl.resource_name == name


class AclStore:
    """The broker's ACLs, in creation order, kept in a JSON file, and indexed for the authorizer: by resource
    type, then by literal name (``*`` among them) or by prefix, so that a check looks at the ACLs that can
    apply to the resource and not at all of them."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._acls: dict[Acl, None] = {}
        self.generation = 0  # counts changes, so that what was decided from the ACLs can be kept until one
        self.saved = written()  # the last write of the file, which runs off the event loop
        # resource type -> (LITERAL name -> ACLs, PREFIXED prefix -> ACLs, the prefixes' lengths)
        self._index: dict[int, tuple[dict[str, list[Acl]], dict[str, list[Acl]], list[int]]] = {}
        if path is not None and path.exists():
            keep_private(str(path))
            for entry in json.loads(path.read_text())["acls"]:
                self._acls[Acl(**entry)] = None
        self._reindex()

    def _reindex(self) -> None:
        index: dict[int, tuple[dict[str, list[Acl]], dict[str, list[Acl]], list[int]]] = {}
        for acl in self._acls:
            literal, prefixed, _lengths = index.setdefault(acl.resource_type, ({}, {}, []))
            names = prefixed if acl.pattern_type == PatternType.PREFIXED else literal
            names.setdefault(acl.resource_name, []).append(acl)
        for _literal, prefixed, lengths in index.values():
            lengths.extend(sorted({len(prefix) for prefix in prefixed}))
        self._index = index
        self.generation += 1

    def applicable(self, resource_type: int, name: str) -> list[Acl]:
        """The ACLs whose pattern matches the resource: its own name, ``*``, its prefixes."""
        found = self._index.get(resource_type)
        if found is None:
            return []
        literal, prefixed, lengths = found
        matching = literal.get(name, []) + (literal.get(WILDCARD, []) if name != WILDCARD else [])
        for length in lengths:
            if length > len(name):
                break
            matching += prefixed.get(name[:length], [])
        return matching

    def __iter__(self):
        return iter(list(self._acls))

    def __len__(self) -> int:
        return len(self._acls)

    def add(self, acls: Iterable[Acl]) -> None:
        for acl in acls:
            self._acls[acl] = None
        self._changed()

    def remove(self, acls: Iterable[Acl]) -> None:
        for acl in acls:
            self._acls.pop(acl, None)
        self._changed()

    def replace(self, acls: Iterable[Acl]) -> None:
        """Hold exactly ``acls`` (a cluster's, from its metadata); the file is rewritten only on a change."""
        wanted = dict.fromkeys(acls)
        if list(wanted) != list(self._acls):
            self._acls = wanted
            self._changed()

    def _changed(self) -> None:
        self._reindex()
        self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        document = {"version": 1, "acls": [acl._asdict() for acl in self._acls]}
        self.saved = write_later(str(self.path), json.dumps(document, indent=1).encode(), private=True)


class Authorizer:
    """Kafka's StandardAuthorizer over an :class:`AclStore`.

    Decisions are kept until the ACLs change (the store's generation moves on), up to ``DECISIONS_KEPT`` of
    them: a Metadata of many topics, a Fetch or Produce of many partitions asks the same questions again and
    again, and an answer kept is a dictionary look-up instead of a walk through the resource's ACLs."""

    DECISIONS_KEPT = 100_000

    def __init__(self, store: AclStore, super_users: Iterable[str] = (), allow_if_no_acl: bool = False) -> None:
        self.store = store
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._decisions: dict[tuple[str, str, int, int, str], bool] = {}
        self._decided_at = store.generation

    def authorize(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                  name: str) -> bool:
        if self._decided_at != self.store.generation:
            self._decisions.clear()
            self._decided_at = self.store.generation
        key = (principal, host, operation, resource_type, name)
        decision = self._decisions.get(key)
        if decision is None:
            decision = self._decide(principal, host, operation, resource_type, name)
            if len(self._decisions) >= self.DECISIONS_KEPT:
                self._decisions.clear()
            self._decisions[key] = decision
        return decision

    def _decide(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                name: str) -> bool:
        if principal in self.super_users:
            return True
        candidates = self.store.applicable(resource_type, name)
        resource_named = bool(candidates)
        allowed = False
        for acl in candidates:
            if acl.principal not in (principal, WILDCARD_PRINCIPAL) or acl.host not in (host, WILDCARD):
                continue
            if acl.permission == Permission.DENY:
                if acl.operation in (operation, Operation.ALL):
                    return False
            elif acl.operation == Operation.ALL or acl.operation in _IMPLIED_BY.get(operation, {operation}):
                allowed = True
        return allowed or (not resource_named and self.allow_if_no_acl)

    def authorize_any(self, principal: str, host: str, operation: Operation, resource_type: ResourceType) -> bool:
        """Whether the principal may do ``operation`` on some resource of the type (Kafka's
        authorizeByResourceType, which lets a producer with WRITE on any topic be idempotent, KIP-679): an
        ALLOW that no DENY of the principal's for the same pattern or for every name cancels."""
        if principal in self.super_users:
            return True
        mine = [acl for acl in self.store if acl.resource_type == resource_type
                and acl.principal in (principal, WILDCARD_PRINCIPAL) and acl.host in (host, WILDCARD)
                and acl.operation in (operation, Operation.ALL)]
        denied = {(acl.pattern_type, acl.resource_name) for acl in mine if acl.permission == Permission.DENY}
        if (PatternType.LITERAL, WILDCARD) in denied:
            return False
        if any(acl.permission == Permission.ALLOW and (acl.pattern_type, acl.resource_name) not in denied
               for acl in mine):
            return True
        return self.allow_if_no_acl and not any(acl.resource_type == resource_type for acl in self.store)

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """The operations of the resource the principal may perform, as Kafka's bit field."""
        bits = 0
        for operation in RESOURCE_OPERATIONS[resource_type]:
            if self.authorize(principal, host, operation, resource_type, name):
                bits |= 1 << operation
        return bits


def parse_super_users(text: str | None) -> list[str]:
    """``super.users``: principals separated by semicolons."""
    return [entry.strip() for entry in (text or "").split(";") if entry.strip()]


# Short names Java's X500Principal uses in RFC 2253 form; other attributes are written by OID.
_RFC2253_KEYS = {"commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
                 "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
                 "domainComponent": "DC", "userId": "UID"}


def certificate_principal(peercert: dict | None) -> str:
    """``User:<subject>`` of a TLS client's certificate as Kafka's default principal builder names it
    (``CN=alice,OU=eng,O=Example``), or ``User:ANONYMOUS`` without one."""
    if not peercert or not peercert.get("subject"):
        return ANONYMOUS
    parts = []
    for rdn in reversed(peercert["subject"]):
        parts.append("+".join(f"{_RFC2253_KEYS.get(key, key)}={_escape(value)}" for key, value in rdn))
    return "User:" + ",".join(parts)


def _escape(value: str) -> str:
    escaped = "".join("\\" + char if char in ',+"\\<>;' else char for char in value)
    if escaped.startswith((" ", "#")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped
