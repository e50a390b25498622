package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// cluster-produce (a phase: only when named, needs -topic): an idempotent franz-go producer
// (acks=all) sends -records records round-robin over the topic's 6 partitions, 4 ms apart,
// while the Rust cluster test (tests/paused_leader_cannot_hide_writes.rs) pauses a leader and
// moves its partitions. Every acknowledged record is printed as "ACKED <partition> <offset>
// <value>" for the test to check against the log; it fails unless every record is
// acknowledged.

const clusterPartitions = 6

func clusterProduce(c *Ctx) {
	check(c.Topic != "", "cluster-produce needs -topic")
	cl := c.Client(
		// -bootstrap names every broker of the cluster, comma-separated.
		kgo.SeedBrokers(strings.Split(c.Bootstrap, ",")...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MetadataMaxAge(time.Second),
		kgo.ProducerLinger(2*time.Millisecond),
	)
	defer cl.Close()
	var mu sync.Mutex
	var acked []string
	var failed []error
	for i := 0; i < c.Records; i++ {
		value := fmt.Sprintf("go%d", i)
		record := &kgo.Record{Topic: c.Topic, Partition: int32(i % clusterPartitions), Value: []byte(value)}
		cl.Produce(context.Background(), record, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, err)
				return
			}
			acked = append(acked, fmt.Sprintf("ACKED %d %d %s", r.Partition, r.Offset, r.Value))
		})
		time.Sleep(4 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	must(cl.Flush(ctx), "flushing")
	mu.Lock()
	defer mu.Unlock()
	for _, line := range acked {
		fmt.Println(line)
	}
	check(len(failed) == 0, "%d records failed, first: %v", len(failed), failed)
	checkEq(c.Records, len(acked), "acknowledged records")
}
