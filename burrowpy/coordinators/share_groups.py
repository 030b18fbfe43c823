"""Reading a cluster's share groups (KIP-932) the way Kafka's ``kafka-share-groups`` tool does.

Every broker is asked for the share groups it coordinates (ListGroups v5 with the type filter "share"), and
the same broker, being their coordinator, for their share-partitions' start offsets and lags
(DescribeShareGroupOffsets with null topics: every partition the group has state for) and for their members
and the share-partitions assigned to each (ShareGroupDescribe, as ``--describe --members``). A cluster whose
brokers cannot list groups by type (ListGroups before v5) has no share groups, and nothing is asked. With
the brokers' metrics endpoints configured, they are scraped for the share-partitions' in-flight records
(:mod:`burrowpy.coordinators.broker_metrics`) side by side with those requests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from broker.protocol.api import ApiKey
from burrowpy.coordinators.codec_request import CodecRequest, NoCommonVersion
from burrowpy.evaluator.share import InFlightCounts, ShareGroupMember, ShareGroupWindows, SharePartitionOffset


class ShareGroupReader:
    def __init__(self, client: Any, windows: ShareGroupWindows, log: Any, metrics: Any = None) -> None:
        """``metrics``: a :class:`burrowpy.coordinators.broker_metrics.BrokerMetricsScraper`, or None when the
        cluster names no broker metrics (in-flight counts are then unknown)."""
        self._client = client
        self._metrics = metrics
        self.windows = windows
        self._log = log
        self._unsupported: set[int] = set()  # brokers that cannot list groups by type, told once
        self._undescribed: set[int] = set()  # brokers that cannot describe share groups' members, told once

    async def read(self, log_ends: Mapping[tuple[str, int], int], now_ms: int) -> None:
        """One reading of every share group of the cluster into the windows. A broker that fails keeps its
        groups' windows as they were (a group is forgotten only once a full listing lacks it)."""
        brokers = sorted(broker.nodeId for broker in self._client.cluster.brokers())
        scrape: list[asyncio.Future[InFlightCounts | None]] = []  # one per reading, begun by the first group

        def in_flight() -> asyncio.Future[InFlightCounts | None]:
            if not scrape:
                scrape.append(asyncio.ensure_future(self._in_flight()))
            return scrape[0]

        try:
            results = await asyncio.gather(*(self._read_broker(node, log_ends, now_ms, in_flight)
                                             for node in brokers), return_exceptions=True)
        finally:
            for pending in scrape:  # a reading cancelled midway leaves no scrape behind
                pending.cancel()
        listed: set[str] = set()
        complete = True
        for node, result in zip(brokers, results, strict=True):
            if isinstance(result, BaseException):
                self._log.warning("reading share groups failed", broker=node, error=repr(result))
                complete = False
            else:
                listed |= result
        if complete:
            self.windows.retain(listed)

    async def _in_flight(self) -> InFlightCounts | None:
        return await self._metrics.in_flight() if self._metrics is not None else None

    async def _read_broker(self, node: int, log_ends: Mapping[tuple[str, int], int], now_ms: int,
                           in_flight: Callable[[], asyncio.Future[InFlightCounts | None]]) -> set[str]:
        try:
            answer = await self._client.send(node, CodecRequest(ApiKey.LIST_GROUPS, {"types_filter": ["share"]},
                                                                min_version=5))
        except NoCommonVersion as exc:
            if node not in self._unsupported:
                self._unsupported.add(node)
                self._log.info("broker cannot list share groups", broker=node, reason=str(exc))
            return set()
        if answer["error_code"]:
            raise RuntimeError(f"ListGroups answered error code {answer['error_code']}")
        states = {group["group_id"]: group["group_state"] for group in answer["groups"]}
        if not states:
            return set()
        counts = in_flight()
        described, members = await asyncio.gather(
            self._client.send(node, CodecRequest(
                ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
                {"groups": [{"group_id": group, "topics": None} for group in sorted(states)]})),
            self._members(node, sorted(states)))
        for group in described["groups"]:
            group_id = group["group_id"]
            if group["error_code"]:
                # e.g. deleted between the two requests, or no longer coordinated here: read again next time
                self._log.warning("describing share group offsets failed", group=group_id,
                                  error_code=group["error_code"], error_message=group["error_message"])
                continue
            readings = []
            for topic in group["topics"]:
                for partition in topic["partitions"]:
                    if partition["error_code"]:
                        self._log.warning("share-partition offset error", group=group_id, topic=topic["topic_name"],
                                          partition=partition["partition_index"],
                                          error_code=partition["error_code"])
                        continue
                    readings.append(SharePartitionOffset(topic["topic_name"], partition["partition_index"],
                                                         partition["start_offset"], partition["lag"]))
            self.windows.observe(group_id, states.get(group_id, ""), readings, log_ends, now_ms,
                                 members.get(group_id, ()), await counts)
        return set(states)

    async def _members(self, node: int, groups: list[str]) -> dict[str, list[ShareGroupMember]]:
        """The members of each of ``groups`` that the broker describes; a group it fails to describe has none
        listed this time (its offsets are still read)."""
        try:
            answer = await self._client.send(node, CodecRequest(
                ApiKey.SHARE_GROUP_DESCRIBE, {"group_ids": groups, "include_authorized_operations": False},
                min_version=1))
        except NoCommonVersion as exc:  # Kafka 4.0 had only the early-access version 0
            if node not in self._undescribed:
                self._undescribed.add(node)
                self._log.info("broker cannot describe share group members", broker=node, reason=str(exc))
            return {}
        members: dict[str, list[ShareGroupMember]] = {}
        for group in answer["groups"]:
            if group["error_code"]:
                self._log.warning("describing share group members failed", group=group["group_id"],
                                  error_code=group["error_code"], error_message=group["error_message"])
                continue
            members[group["group_id"]] = [
                ShareGroupMember(member["member_id"], member["client_id"], member["client_host"], frozenset(
                    (topic["topic_name"], partition) for topic in member["assignment"]["topic_partitions"]
                    for partition in topic["partitions"]))
                for member in group["members"]]
        return members
