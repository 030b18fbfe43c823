"""Partition logs: segments, indexes, recovery, retention and compaction (see partition.py)."""

from broker.log.config import LogConfig
from broker.log.manager import LogManager, Topic
from broker.log.partition import AppendResult, PartitionLog

__all__ = ["AppendResult", "LogConfig", "LogManager", "PartitionLog", "Topic"]
