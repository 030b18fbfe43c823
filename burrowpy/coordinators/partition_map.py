"""A figure per partition of a cluster (its leader, its newest broker offset), held as one list per topic.

The cluster module keeps two such figures for every partition it polls. As dicts keyed by ``(topic, partition)``
they cost a tuple and a slot of a dict's table per partition and map: at fleet scale (50,750 partitions) about
5 MiB a map of the monitor's held memory (bench/README.md, "The whole monitor's memory at fleet scale"). A list
per topic indexed by partition is a pointer per partition (the figures themselves are the small ints of leader
ids, or the ints of the ListOffsets answers, shared), about 0.5 MiB a map at that scale.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any


class PartitionMap(Mapping[tuple[str, int], int]):
    """A read-only ``Mapping`` of ``(topic, partition)`` to an int for those who read it (``get``, ``[]``,
    iteration, equality with any mapping), filled a topic at a time (:meth:`set`, :meth:`drop`). A partition
    without a figure is ``None`` in its topic's list: not in the mapping."""

    __slots__ = ("_topics",)

    def __init__(self, pairs: Mapping[tuple[str, int], int] | Iterable[tuple[tuple[str, int], int]] = ()) -> None:
        self._topics: dict[str, list[int | None]] = {}
        self.update(pairs)

    def set(self, topic: str, partitions: Iterable[int], figures: Iterable[int]) -> None:
        """Each of ``partitions`` of ``topic`` takes its figure (the others keep theirs)."""
        row = self._topics.get(topic)
        if row is None:
            row = self._topics[topic] = []
        for partition, figure in zip(partitions, figures, strict=True):
            if partition < 0:
                raise ValueError(f"partition {partition} of {topic}")
            if partition >= len(row):
                row.extend([None] * (partition + 1 - len(row)))
            row[partition] = figure

    def update(self, pairs: Mapping[tuple[str, int], int] | Iterable[tuple[tuple[str, int], int]]) -> None:
        """As ``dict.update``, a pair at a time."""
        for (topic, partition), figure in (pairs.items() if isinstance(pairs, Mapping) else pairs):
            self.set(topic, (partition,), (figure,))

    def drop(self, topic: str) -> None:
        """Every figure of ``topic`` forgotten (a deleted topic)."""
        self._topics.pop(topic, None)

    def by_topic(self) -> Iterator[tuple[str, list[int | None]]]:
        """Each topic and its figures by partition index (``None``: no figure); not to be changed."""
        return iter(self._topics.items())

    def get(self, key: tuple[str, int], default: Any = None) -> Any:
        row = self._topics.get(key[0])
        partition = key[1]
        if row is None or not 0 <= partition < len(row):
            return default
        figure = row[partition]
        return default if figure is None else figure

    def __getitem__(self, key: tuple[str, int]) -> int:
        figure = self.get(key)
        if figure is None:
            raise KeyError(key)
        return figure  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[tuple[str, int]]:
        for topic, row in self._topics.items():
            for partition, figure in enumerate(row):
                if figure is not None:
                    yield topic, partition

    def __len__(self) -> int:
        return sum(len(row) - row.count(None) for row in self._topics.values())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PartitionMap):
            return self._figures() == other._figures()
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]

    def _figures(self) -> dict[str, list[int | None]]:
        """The topics that hold a figure, each row without the Nones after its last figure: equal maps, equal
        values, however they were filled."""
        figures: dict[str, list[int | None]] = {}
        for topic, row in self._topics.items():
            end = len(row)
            while end and row[end - 1] is None:
                end -= 1
            if end:
                figures[topic] = row if end == len(row) else row[:end]
        return figures
