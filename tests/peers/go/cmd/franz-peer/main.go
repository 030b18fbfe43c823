// franz-peer: produce and consume in a group with franz-go (kgo), committing with kgo's group
// committer. See internal/peer for the command line and output.
package main

import (
	"context"

	"burrowpy/peers/internal/peer"

	"github.com/twmb/franz-go/pkg/kgo"
)

func produce(args peer.Args) {
	client, err := kgo.NewClient(kgo.SeedBrokers(args.Bootstrap), kgo.ClientID("franz-peer"),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		peer.Fail(err)
	}
	defer client.Close()
	records := make([]*kgo.Record, args.Count)
	for i := range records {
		records[i] = &kgo.Record{Topic: args.Topic, Key: []byte(peer.Key(i)), Value: []byte(peer.Value(i)),
			Headers: []kgo.RecordHeader{{Key: "peer", Value: []byte("franz-go")}}}
	}
	ctx, cancel := peer.WithTimeout()
	defer cancel()
	results := client.ProduceSync(ctx, records...)
	if err := results.FirstErr(); err != nil {
		peer.Fail(err)
	}
	for _, result := range results {
		record := result.Record
		peer.Produced(record.Partition, record.Offset, string(record.Key), string(record.Value))
	}
}

func consume(args peer.Args) {
	client, err := kgo.NewClient(kgo.SeedBrokers(args.Bootstrap), kgo.ClientID("franz-peer"),
		kgo.ConsumerGroup(args.Group), kgo.ConsumeTopics(args.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
			peer.Emit("assigned", map[string]any{"partitions": assigned})
		}))
	if err != nil {
		peer.Fail(err)
	}
	ctx, stop := peer.UntilSignalled()
	defer stop()
	for ctx.Err() == nil {
		fetches := client.PollFetches(ctx)
		fetches.EachError(func(topic string, partition int32, err error) {
			if ctx.Err() == nil {
				peer.Fail(err)
			}
		})
		fetches.EachRecord(func(record *kgo.Record) {
			headers := map[string]string{}
			for _, header := range record.Headers {
				headers[header.Key] = string(header.Value)
			}
			peer.Consumed(record.Partition, record.Offset, record.Key, record.Value, headers)
		})
		// Autocommit would commit these within its interval; committing now keeps the test short.
		commitCtx, cancel := peer.WithTimeout()
		if err := client.CommitUncommittedOffsets(commitCtx); err != nil {
			peer.Fail(err)
		}
		cancel()
	}
	closeCtx, cancel := peer.WithTimeout()
	defer cancel()
	if err := client.CommitUncommittedOffsets(closeCtx); err != nil {
		peer.Fail(err)
	}
	client.LeaveGroup()
	client.Close()
	peer.Emit("closed", nil)
}

func main() {
	peer.Run("franz-go", produce, consume)
}
