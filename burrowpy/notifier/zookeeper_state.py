"""The incidents' state carried with the ZooKeeper notifier lock, as the Kafka lock carries it in its compacted
topic (``kafka_lock.py``): one znode per group under ``<root-path>/notifier-state``, holding the JSON of what that
group's notifiers were last told. Burrow keeps this state in memory only, so a new sender announces every open
incident again; here the new sender reads it before it decides anything.

A write is a ZooKeeper transaction that also checks the sender's lock node: once the sender's session is gone
(and another instance may hold the lock), its late writes fail instead of overwriting the new sender's state.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from kazoo.exceptions import KazooException, NoNodeError

from burrowpy.coordinators.zookeeper import ZookeeperLock
from burrowpy.notifier.decision import GroupState, state_from_json, state_to_json

STATE_NODE = "notifier-state"


def _node_name(cluster: str, group: str) -> str:
    """A znode name for any cluster and group name (a group name may hold '/')."""
    return base64.urlsafe_b64encode(json.dumps([cluster, group]).encode()).decode().rstrip("=")


class ZookeeperIncidentStore:
    """The notifier coordinator's IncidentStore next to a ZooKeeper lock."""

    def __init__(self, lock: ZookeeperLock) -> None:
        self.lock = lock
        self.path = f"{lock.zookeeper.root_path}/{STATE_NODE}"
        self.logger = lock.logger

    @property
    def generation(self) -> int:
        return self.lock.generation

    async def load_states(self) -> dict[tuple[str, str], GroupState]:
        return await asyncio.to_thread(self._load)

    def _load(self) -> dict[tuple[str, str], GroupState]:
        client = self.lock.zookeeper.client
        client.ensure_path(self.path)
        states: dict[tuple[str, str], GroupState] = {}
        for child in client.get_children(self.path):
            try:
                data, _stat = client.get(f"{self.path}/{child}")
                record = json.loads(data)
                states[(record["cluster"], record["group"])] = state_from_json(record["state"])
            except NoNodeError:
                continue  # deleted since the listing
            except (ValueError, TypeError, KeyError) as exc:
                # one malformed node must not keep the sender from sending for every other group
                self.logger.warning("skipped a malformed notification state node", node=child, error=repr(exc))
        self.logger.info("read the notification state of the groups", groups=len(states))
        return states

    async def save_state(self, cluster: str, group: str, state: GroupState) -> None:
        """Record ``state`` for the next sender; an empty state deletes the group's node."""
        await asyncio.to_thread(self._save, cluster, group, state)

    def _save(self, cluster: str, group: str, state: GroupState) -> None:
        client = self.lock.zookeeper.client
        lock_node = self.lock.node_path
        if lock_node is None:
            raise RuntimeError("this instance does not hold the ZooKeeper notifier lock")
        path = f"{self.path}/{_node_name(cluster, group)}"
        exists = client.exists(path) is not None
        transaction: Any = client.transaction()
        transaction.check(lock_node, 0)  # the lock node is never changed: version 0 while it exists
        if state == GroupState():
            if not exists:
                return
            transaction.delete(path)
        else:
            data = json.dumps({"cluster": cluster, "group": group, "state": state_to_json(state)}).encode()
            if exists:
                transaction.set_data(path, data)
            else:
                transaction.create(path, data)
        results = transaction.commit()
        failed = [result for result in results if isinstance(result, Exception)]
        if failed:
            raise KazooException(f"the notification state of {cluster}/{group} was not written: {failed[0]!r} "
                                 "(the lock node is gone when this instance no longer holds the lock)")
