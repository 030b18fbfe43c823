// kafkago-peer: produce and consume in a group with segmentio/kafka-go (Writer, and a group Reader
// committing each record after printing it). See internal/peer for the command line and output.
package main

import (
	"errors"
	"io"
	"time"

	"burrowpy/peers/internal/peer"

	"github.com/segmentio/kafka-go"
)

func produce(args peer.Args) {
	var completionErr error
	writer := &kafka.Writer{Addr: kafka.TCP(args.Bootstrap), Topic: args.Topic, Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, BatchSize: args.Count,
		// The writer reports each written batch with its partition and offsets filled in.
		Completion: func(messages []kafka.Message, err error) {
			if err != nil {
				completionErr = err
				return
			}
			for _, message := range messages {
				peer.Produced(int32(message.Partition), message.Offset, string(message.Key), string(message.Value))
			}
		}}
	messages := make([]kafka.Message, args.Count)
	for i := range messages {
		messages[i] = kafka.Message{Key: []byte(peer.Key(i)), Value: []byte(peer.Value(i)),
			Headers: []kafka.Header{{Key: "peer", Value: []byte("kafka-go")}}}
	}
	ctx, cancel := peer.WithTimeout()
	defer cancel()
	if err := writer.WriteMessages(ctx, messages...); err != nil {
		peer.Fail(err)
	}
	if err := writer.Close(); err != nil {
		peer.Fail(err)
	}
	if completionErr != nil {
		peer.Fail(completionErr)
	}
}

func consume(args peer.Args) {
	// Fetches wait at most half a second for data (the default is 10 s): closing the reader waits for the
	// fetch in flight, so a long wait would make every stop take that long.
	reader := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{args.Bootstrap}, GroupID: args.Group,
		Topic: args.Topic, StartOffset: kafka.FirstOffset, MaxWait: 500 * time.Millisecond})
	ctx, stop := peer.UntilSignalled()
	defer stop()
	for {
		message, err := reader.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				break
			}
			peer.Fail(err)
		}
		headers := map[string]string{}
		for _, header := range message.Headers {
			headers[header.Key] = string(header.Value)
		}
		peer.Consumed(int32(message.Partition), message.Offset, message.Key, message.Value, headers)
		commitCtx, cancel := peer.WithTimeout()
		if err := reader.CommitMessages(commitCtx, message); err != nil {
			peer.Fail(err)
		}
		cancel()
	}
	if err := reader.Close(); err != nil {
		peer.Fail(err)
	}
	peer.Emit("closed", nil)
}

func main() {
	peer.Run("kafka-go", produce, consume)
}
