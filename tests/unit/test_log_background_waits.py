"""Requests waiting on the same background job (a roll, a log's fsyncs, a topic file): one whose client goes away
(its task cancelled) leaves the job's future alone, so the others get its outcome and the job's thread can set it.
Found by the topic churn test: a cancelled waiter cancelled the shared future, the other waiters failed with it,
and the metadata writer's thread failed on ``set_result``."""

from __future__ import annotations

import asyncio
import concurrent.futures

import pytest

from broker.errors import ErrorCode, KafkaError
from broker.log.background import settled, wait_durable


async def _two_waiters_one_leaves(future: concurrent.futures.Future[None]) -> asyncio.Task[None]:
    leaving = asyncio.create_task(wait_durable(future, "topic t"))
    staying = asyncio.create_task(wait_durable(future, "topic t"))
    await asyncio.sleep(0)  # both waiting
    leaving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leaving
    return staying


async def test_a_waiter_that_leaves_does_not_take_the_job_with_it() -> None:
    job: concurrent.futures.Future[None] = concurrent.futures.Future()
    staying = await _two_waiters_one_leaves(job)
    assert not job.cancelled()
    await asyncio.to_thread(job.set_result, None)  # the job's thread, done: no InvalidStateError
    await asyncio.wait_for(staying, 5)


async def test_the_others_still_get_a_failure_as_kafkas_storage_error() -> None:
    job: concurrent.futures.Future[None] = concurrent.futures.Future()
    staying = await _two_waiters_one_leaves(job)
    await asyncio.to_thread(job.set_exception, OSError(28, "No space left on device"))
    with pytest.raises(KafkaError) as refused:
        await asyncio.wait_for(staying, 5)
    assert refused.value.code == ErrorCode.KAFKA_STORAGE_ERROR


async def test_settled_alone_gives_the_outcome() -> None:
    job: concurrent.futures.Future[None] = concurrent.futures.Future()
    waiter = asyncio.create_task(settled(job))
    await asyncio.sleep(0)
    job.set_result(None)
    assert await asyncio.wait_for(waiter, 5) is None
