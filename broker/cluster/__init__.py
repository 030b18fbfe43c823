"""The broker cluster: several brokers from one install, no ZooKeeper.

* :mod:`~broker.cluster.metadata`: the replicated metadata, a pure state machine.
* :mod:`~broker.cluster.raft`: the metadata quorum, our interface over pysyncobj.
* :mod:`~broker.cluster.membership`: SWIM gossip, who is alive.
* :mod:`~broker.cluster.controller`: what the Raft leader decides from gossip.
* :mod:`~broker.cluster.replication` (and :mod:`~broker.cluster.isr`): partition replication.
* :mod:`~broker.cluster.node`: one broker as a node of the cluster, wiring all of the above.
* :mod:`~broker.cluster.config`: the ``cluster:`` block of the broker config.
"""
