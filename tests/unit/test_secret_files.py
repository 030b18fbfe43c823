"""Files that hold secrets (SCRAM credentials, ACLs, dynamic configs) are the owner's only: 0600 from the
moment they exist, whatever the umask, and tightened when an older version left them readable."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker.config import BrokerConfig
from broker.dynamic_config import FILE_NAME as DYNAMIC_CONFIGS_FILE
from broker.dynamic_config import DynamicBrokerConfigs
from broker.log.files import TEMP_SUFFIX
from broker.security.acl import Acl, AclStore, Operation, PatternType, Permission, ResourceType
from broker.security.scram import ScramStore, credential_from_password


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    """A umask that hides nothing, so only the code's own modes count."""
    previous = os.umask(0)
    yield
    os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def save_scram(path: Path) -> None:
    store = ScramStore(path)
    store.apply([("alice", "SCRAM-SHA-256", credential_from_password("SCRAM-SHA-256", "alice-secret"))], [])
    store.saved.result(10)  # written off the caller's thread


def save_acls(path: Path) -> None:
    store = AclStore(path)
    store.add([Acl(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*", Operation.READ,
                   Permission.ALLOW)])
    store.saved.result(10)


def save_dynamic_configs(path: Path) -> None:
    config_file = path.parent / "broker.yaml"
    config_file.write_text("{}\n")
    config = BrokerConfig.load(config_file, data_dir=str(path.parent), node_id=1)
    dynamic = DynamicBrokerConfigs(config, persist=True)
    dynamic.update("", {"ssl.keystore.password": "keystore-secret"})
    dynamic.saved.result(10)


STORES: dict[str, tuple[str, Callable[[Path], None]]] = {
    "scram": ("scram-credentials.json", save_scram),
    "acls": ("acls.json", save_acls),
    "dynamic-configs": (DYNAMIC_CONFIGS_FILE, save_dynamic_configs),
}
LOADERS: dict[str, Callable[[Path], object]] = {"scram": ScramStore, "acls": AclStore}


@pytest.mark.parametrize("kind", STORES)
def test_written_for_the_owner_only(tmp_path, kind):
    name, save = STORES[kind]
    path = tmp_path / name
    save(path)
    assert mode(path) == 0o600


@pytest.mark.parametrize("kind", STORES)
def test_a_temporary_file_left_by_a_crash_is_not_reused(tmp_path, kind):
    """Someone who could open the readable leftover must not read the new content through it."""
    name, save = STORES[kind]
    path = tmp_path / name
    leftover = Path(str(path) + TEMP_SUFFIX)
    leftover.write_text("")
    leftover.chmod(0o644)
    with open(leftover, "rb") as spy:
        save(path)
        assert spy.read() == b""
    assert mode(path) == 0o600


@pytest.mark.parametrize("kind", LOADERS)
def test_a_readable_file_from_before_is_made_private_on_load(tmp_path, kind):
    name, save = STORES[kind]
    path = tmp_path / name
    save(path)
    path.chmod(0o644)
    LOADERS[kind](path)
    assert mode(path) == 0o600


def test_dynamic_configs_from_before_are_made_private_on_load(tmp_path):
    path = tmp_path / DYNAMIC_CONFIGS_FILE
    save_dynamic_configs(path)
    path.chmod(0o644)
    config = BrokerConfig.load(tmp_path / "broker.yaml", data_dir=str(tmp_path), node_id=1)
    assert DynamicBrokerConfigs(config, persist=True).layers[""] == {"ssl.keystore.password": "keystore-secret"}
    assert mode(path) == 0o600
