// sarama-peer: produce and consume in a group with IBM's Sarama, speaking the newest protocol versions
// it knows. See internal/peer for the command line and output.
package main

import (
	"context"
	"errors"

	"burrowpy/peers/internal/peer"

	"github.com/IBM/sarama"
)

func config() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = "sarama-peer"
	cfg.Version = sarama.MaxVersion
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Return.Errors = true
	return cfg
}

func produce(args peer.Args) {
	producer, err := sarama.NewSyncProducer([]string{args.Bootstrap}, config())
	if err != nil {
		peer.Fail(err)
	}
	defer producer.Close()
	for i := 0; i < args.Count; i++ {
		message := &sarama.ProducerMessage{Topic: args.Topic, Key: sarama.StringEncoder(peer.Key(i)),
			Value:   sarama.StringEncoder(peer.Value(i)),
			Headers: []sarama.RecordHeader{{Key: []byte("peer"), Value: []byte("sarama")}}}
		partition, offset, err := producer.SendMessage(message)
		if err != nil {
			peer.Fail(err)
		}
		peer.Produced(partition, offset, peer.Key(i), peer.Value(i))
	}
}

// member marks every record it prints; Sarama commits marked offsets every second and when it closes.
type member struct{}

func (member) Setup(session sarama.ConsumerGroupSession) error {
	peer.Emit("assigned", map[string]any{"partitions": session.Claims()})
	return nil
}

func (member) Cleanup(session sarama.ConsumerGroupSession) error {
	session.Commit()
	return nil
}

func (member) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for message := range claim.Messages() {
		headers := map[string]string{}
		for _, header := range message.Headers {
			headers[string(header.Key)] = string(header.Value)
		}
		peer.Consumed(message.Partition, message.Offset, message.Key, message.Value, headers)
		session.MarkMessage(message, "")
	}
	return nil
}

func consume(args peer.Args) {
	group, err := sarama.NewConsumerGroup([]string{args.Bootstrap}, args.Group, config())
	if err != nil {
		peer.Fail(err)
	}
	ctx, stop := peer.UntilSignalled()
	defer stop()
	go func() {
		for err := range group.Errors() {
			peer.Emit("error", map[string]any{"error": err.Error()})
		}
	}()
	for ctx.Err() == nil {
		// Consume returns at every rebalance; join again until signalled.
		if err := group.Consume(ctx, []string{args.Topic}, member{}); err != nil &&
			!errors.Is(err, context.Canceled) && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
			peer.Fail(err)
		}
	}
	if err := group.Close(); err != nil {
		peer.Fail(err)
	}
	peer.Emit("closed", nil)
}

func main() {
	peer.Run("sarama", produce, consume)
}
