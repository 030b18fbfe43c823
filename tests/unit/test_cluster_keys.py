from broker.cluster.keys import derive_key


def test_each_purpose_gets_its_own_key_and_the_same_secret_gives_the_same_keys():
    secret = "a long enough shared secret for the tests"
    gossip, raft = derive_key(secret, "gossip"), derive_key(secret, "raft")
    assert gossip != raft
    assert len(gossip) == 32
    assert derive_key(secret.encode(), "gossip") == gossip
    assert derive_key(secret + "!", "gossip") != gossip
    assert secret.encode() not in gossip
