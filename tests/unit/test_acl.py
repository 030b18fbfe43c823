"""Kafka's ACL rules (StandardAuthorizer): matching, precedence, implied operations, defaults, filters."""

from __future__ import annotations

import pytest

from broker.security.acl import (
    Acl,
    AclError,
    AclFilter,
    AclStore,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    certificate_principal,
    validate_new,
)

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
Op = Operation


def acl(kind=TOPIC, name="orders", pattern=LITERAL, principal="User:alice", host="*", operation=Op.READ,
        permission=ALLOW) -> Acl:
    return Acl(kind, name, pattern, principal, host, operation, permission)


def authorizer(*acls: Acl, super_users=(), allow_if_no_acl=False) -> Authorizer:
    store = AclStore(None)
    store.add(acls)
    return Authorizer(store, super_users, allow_if_no_acl)


def may(auth: Authorizer, operation, name="orders", kind=TOPIC, principal="User:alice", host="10.0.0.1") -> bool:
    return auth.authorize(principal, host, operation, kind, name)


def test_an_allow_grants_its_operation_only_to_its_principal():
    auth = authorizer(acl())
    assert may(auth, Op.READ)
    assert not may(auth, Op.WRITE)
    assert not may(auth, Op.READ, principal="User:bob")  # the resource has ACLs: others are denied
    assert not may(auth, Op.READ, name="payments")  # no ACL names it, and allow.everyone is off


def test_implied_operations_come_from_allows_only():
    auth = authorizer(acl(operation=Op.WRITE), acl(operation=Op.ALTER_CONFIGS))
    assert may(auth, Op.DESCRIBE) and may(auth, Op.DESCRIBE_CONFIGS)
    denied = authorizer(acl(operation=Op.ALL), acl(operation=Op.READ, permission=DENY))
    assert not may(denied, Op.READ)
    assert may(denied, Op.DESCRIBE)  # a DENY of READ does not deny DESCRIBE
    assert may(denied, Op.DELETE)


def test_deny_wins_and_all_covers_every_operation():
    auth = authorizer(acl(principal="User:*", operation=Op.ALL), acl(operation=Op.ALL, permission=DENY))
    assert may(auth, Op.READ, principal="User:bob")
    assert not may(auth, Op.READ)
    assert not may(auth, Op.DESCRIBE)


def test_hosts_wildcards_and_prefixes():
    auth = authorizer(acl(host="10.0.0.1"), acl(name="*", operation=Op.DESCRIBE),
                      acl(name="logs-", pattern=PREFIXED, operation=Op.WRITE))
    assert may(auth, Op.READ) and not may(auth, Op.READ, host="10.0.0.2")
    assert may(auth, Op.DESCRIBE, name="anything")
    assert may(auth, Op.WRITE, name="logs-app") and not may(auth, Op.WRITE, name="log")
    # a LITERAL name is not a prefix
    assert not may(authorizer(acl(name="logs")), Op.READ, name="logs-app")


def test_super_users_and_the_no_acl_default():
    auth = authorizer(acl(), super_users=["User:admin"], allow_if_no_acl=True)
    assert may(auth, Op.DELETE, principal="User:admin")
    assert may(auth, Op.WRITE, name="free", principal="User:bob")  # no ACL names it
    assert not may(auth, Op.READ, principal="User:bob")  # ACLs name it, none for bob


def test_authorize_any_lets_a_writer_of_some_topic_be_idempotent():
    assert authorizer(acl(name="t", operation=Op.WRITE)).authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    assert not authorizer(acl(name="t", operation=Op.READ)).authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    cancelled = authorizer(acl(name="t", operation=Op.WRITE), acl(name="*", operation=Op.WRITE, permission=DENY))
    assert not cancelled.authorize_any("User:alice", "h", Op.WRITE, TOPIC)


def test_authorized_operations_bit_field():
    auth = authorizer(acl(kind=GROUP, name="g", operation=Op.READ))
    assert auth.authorized_operations("User:alice", "h", GROUP, "g") == (1 << Op.READ) | (1 << Op.DESCRIBE)


def test_filters_match_as_kafkas_do():
    stored = [acl(), acl(name="logs-", pattern=PREFIXED), acl(name="*"), acl(kind=GROUP, name="orders")]
    match = AclFilter(TOPIC, "orders", PatternType.MATCH, None, None, Op.ANY, Permission.ANY)
    assert [a for a in stored if match.matches(a)] == [stored[0], stored[2]]
    prefixed = AclFilter(ResourceType.ANY, None, PatternType.ANY, "User:alice", None, Op.READ, ALLOW)
    assert all(prefixed.matches(a) for a in stored)
    literal = AclFilter(TOPIC, None, LITERAL, None, None, Op.ANY, Permission.ANY)
    assert [a for a in stored if literal.matches(a)] == [stored[0], stored[2]]
    with pytest.raises(AclError, match="Unknown patternFilter"):
        AclFilter(TOPIC, None, PatternType.UNKNOWN, None, None, Op.ANY, Permission.ANY).validate()
    with pytest.raises(AclError, match="Unknown entryFilter"):
        AclFilter(TOPIC, None, LITERAL, None, None, 99, Permission.ANY).validate()


@pytest.mark.parametrize(("bad", "message"), [
    (acl(kind=ResourceType.ANY), "Invalid resourceType ANY"),
    (acl(pattern=PatternType.MATCH), "Invalid patternType MATCH"),
    (acl(operation=Op.ANY), "Invalid operation ANY"),
    (acl(permission=Permission.ANY), "Invalid permissionType ANY"),
    (acl(name=""), "Resource name should not be empty"),
    (acl(principal="alice"), "Could not parse principal from `alice`"),
])
def test_invalid_acls_are_refused_in_kafkas_words(bad, message):
    with pytest.raises(AclError, match=message):
        validate_new(bad)


def test_the_store_survives_a_restart(tmp_path):
    path = tmp_path / "acls.json"
    store = AclStore(path)
    store.add([acl(), acl(operation=Op.WRITE)])
    store.remove([acl()])
    store.saved.result(10)  # written off the caller's thread
    assert list(AclStore(path)) == [acl(operation=Op.WRITE)]


def test_certificate_subjects_are_named_as_java_names_them():
    subject = ((("countryName", "US"),), (("organizationName", "Example, Inc"),), (("commonName", "alice"),))
    assert certificate_principal({"subject": subject}) == "User:CN=alice,O=Example\\, Inc,C=US"
    assert certificate_principal({}) == "User:ANONYMOUS"
    assert certificate_principal(None) == "User:ANONYMOUS"


def test_every_prefix_of_a_name_is_looked_up():
    auth = authorizer(acl(name="a", pattern=PREFIXED, operation=Op.READ),
                      acl(name="abc-", pattern=PREFIXED, operation=Op.WRITE),
                      acl(name="abd", pattern=PREFIXED, operation=Op.DELETE),
                      acl(name="abc-x", operation=Op.ALTER))
    assert may(auth, Op.READ, name="abc-x") and may(auth, Op.WRITE, name="abc-x")
    assert may(auth, Op.ALTER, name="abc-x") and not may(auth, Op.ALTER, name="abc-xy")
    assert not may(auth, Op.DELETE, name="abc-x") and may(auth, Op.DELETE, name="abd")
    assert not may(auth, Op.WRITE, name="abc")  # the prefix is longer than the name
    auth.store.remove([acl(name="abc-", pattern=PREFIXED, operation=Op.WRITE)])
    assert not may(auth, Op.WRITE, name="abc-x")  # the index follows every change


def test_kept_decisions_follow_every_change_of_the_acls():
    auth = authorizer(acl())
    assert may(auth, Op.READ) and may(auth, Op.READ)  # the second answer is the kept one
    auth.store.add([acl(permission=DENY)])
    assert not may(auth, Op.READ)  # an added DENY counts at once
    auth.store.remove([acl(permission=DENY)])
    assert may(auth, Op.READ)
    auth.store.replace([acl(principal="User:bob")])  # as a cluster node takes the metadata's ACLs
    assert not may(auth, Op.READ)
    assert may(auth, Op.READ, principal="User:bob")
    auth.store.replace([acl(principal="User:bob")])  # the same ACLs again: nothing changes
    assert may(auth, Op.READ, principal="User:bob") and not may(auth, Op.READ)


def test_kept_decisions_are_bounded_and_told_apart_by_every_part_of_the_question(monkeypatch):
    monkeypatch.setattr(Authorizer, "DECISIONS_KEPT", 8)
    auth = authorizer(acl(), acl(name="t-", pattern=PREFIXED, host="10.0.0.1", operation=Op.WRITE))
    for number in range(50):
        assert may(auth, Op.WRITE, name=f"t-{number}")
        assert not may(auth, Op.WRITE, name=f"t-{number}", host="10.0.0.2")
        assert not may(auth, Op.WRITE, name=f"t-{number}", principal="User:bob")
        assert not may(auth, Op.READ, name=f"t-{number}")
        assert not may(auth, Op.WRITE, name=f"t-{number}", kind=GROUP)
    assert len(auth._decisions) <= 8
