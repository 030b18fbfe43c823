"""pytest fixtures for a real ZooKeeper (see zk.py); registered from tests/integration/conftest.py.

``zookeeper``: a fresh server for one test (function scope), stopped afterwards even when the test
fails. ``zookeeper_module``: one server shared by the tests of a module; give each test its own root
path. A machine without Java or Debian's zookeeper package fails these tests with the reason instead
of skipping them: ``make install`` installs both.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from zk import ZooKeeperServer


@pytest.fixture
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


@pytest.fixture(scope="module")
def zookeeper_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server
