// Package peer holds what the Go test peers share: their command line and their JSON-lines output.
//
// Every peer takes the same arguments and prints one JSON object per line on stdout, so the Python
// tests drive Sarama, franz-go and kafka-go alike:
//
//	<peer> produce --bootstrap HOST:PORT --topic T --count N
//	<peer> consume --bootstrap HOST:PORT --topic T --group G
//
// produce sends records with key "key-<i>", value "value-<i>" and a header peer=<library>, and prints
// {"event":"produced","partition":P,"offset":O,"key":K,"value":V} for each acknowledged record.
// consume joins group G, reads T from the oldest offset, prints {"event":"consumed",...} for every
// record with its headers, and commits what it has read; on SIGTERM or SIGINT it commits, leaves the
// group and prints {"event":"closed"} before exiting 0. Failures go to stderr with exit code 1.
package peer

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// Args are the parsed command line of a peer.
type Args struct {
	Command   string
	Bootstrap string
	Topic     string
	Group     string
	Count     int
}

// Parse reads the command line; it exits with a usage message when something is missing.
func Parse(library string) Args {
	if len(os.Args) < 2 || (os.Args[1] != "produce" && os.Args[1] != "consume") {
		Fail(fmt.Errorf("usage: %s-peer produce|consume --bootstrap HOST:PORT --topic T [--count N] [--group G]", library))
	}
	args := Args{Command: os.Args[1]}
	flags := flag.NewFlagSet(args.Command, flag.ExitOnError)
	flags.StringVar(&args.Bootstrap, "bootstrap", "", "bootstrap server HOST:PORT")
	flags.StringVar(&args.Topic, "topic", "", "topic")
	flags.StringVar(&args.Group, "group", "", "consumer group (consume)")
	flags.IntVar(&args.Count, "count", 0, "records to produce (produce)")
	if err := flags.Parse(os.Args[2:]); err != nil {
		Fail(err)
	}
	if args.Bootstrap == "" || args.Topic == "" || (args.Command == "consume" && args.Group == "") ||
		(args.Command == "produce" && args.Count <= 0) {
		Fail(fmt.Errorf("%s: --bootstrap, --topic and --count (produce) or --group (consume) are required", args.Command))
	}
	return args
}

// Key and Value are the contents of the i-th produced record.
func Key(i int) string   { return fmt.Sprintf("key-%d", i) }
func Value(i int) string { return fmt.Sprintf("value-%d", i) }

var outputLock sync.Mutex

// Emit prints one event as a JSON line.
func Emit(event string, fields map[string]any) {
	line := map[string]any{"event": event}
	for key, value := range fields {
		line[key] = value
	}
	encoded, err := json.Marshal(line)
	if err != nil {
		Fail(err)
	}
	outputLock.Lock()
	defer outputLock.Unlock()
	fmt.Println(string(encoded))
}

// Produced and Consumed print the two record events in the same shape for every library.
func Produced(partition int32, offset int64, key, value string) {
	Emit("produced", map[string]any{"partition": partition, "offset": offset, "key": key, "value": value})
}

func Consumed(partition int32, offset int64, key, value []byte, headers map[string]string) {
	Emit("consumed", map[string]any{"partition": partition, "offset": offset, "key": string(key),
		"value": string(value), "headers": headers})
}

// Fail reports an error on stderr and exits 1.
func Fail(err error) {
	fmt.Fprintln(os.Stderr, "error:", err)
	os.Exit(1)
}

// UntilSignalled is a context that ends on SIGTERM or SIGINT.
func UntilSignalled() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
}

// WithTimeout bounds one client operation.
func WithTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 60*time.Second)
}

// Run parses the command line and runs the chosen command of a peer.
func Run(library string, produce, consume func(Args)) {
	args := Parse(library)
	if args.Command == "produce" {
		produce(args)
	} else {
		consume(args)
	}
}
