"""A transactional producer left in the middle of a transaction, to be killed (kill -9) by a test.

    python txn_producer.py BOOTSTRAP TOPIC TRANSACTIONAL_ID COUNT TIMEOUT_MS

It begins a transaction, writes COUNT records to partition 0 of TOPIC (values "open-<i>"), flushes them,
prints {"state": "open"} and then waits, the transaction open, until it is killed.
"""

from __future__ import annotations

import json
import sys
import time

from confluent_kafka import Producer


def main() -> None:
    bootstrap, topic, transactional_id, count, timeout_ms = sys.argv[1:6]
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "transaction.timeout.ms": int(timeout_ms)})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(int(count)):
        producer.produce(topic, value=f"open-{i}".encode(), partition=0)
    producer.flush(30)
    print(json.dumps({"state": "open"}), flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
