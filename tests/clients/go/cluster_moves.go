package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cluster-moves (a phase: only when named, needs -topic and -group): an idempotent franz-go
// producer (acks=all) and a group consumer that commits, at once, while the Rust cluster test
// (tests/partitions_move_between_brokers.rs) moves partitions and groups between brokers and
// kills one. The producer sends -records records "go<i>" round-robin over the topic's 6
// partitions, 4 ms apart, and prints PRODUCING once the first is acknowledged; the consumer
// reads the topic in -group and commits what every poll returned. At the end it prints
// "ACKED <partition> <offset> <value>" for every acknowledged record and "COMMITTED <partition>
// <offset>" for the group's last successful commit of each partition: the lines of
// tests/clients/python/cluster_moves.py's files, which its verify and consume --check phases
// check against the cluster. It fails unless every record is acknowledged and the consumer read
// each of them (other clients' records in the topic are read and committed past, not checked).

// clusterMovesLimit bounds the consumer's catching up after the last send.
const clusterMovesLimit = 90 * time.Second

type ackedRecord struct {
	partition int32
	offset    int64
	value     string
}

func clusterMoves(c *Ctx) {
	check(c.Topic != "" && c.Group != "", "cluster-moves needs -topic and -group")
	seeds := kgo.SeedBrokers(strings.Split(c.Bootstrap, ",")...)
	var mu sync.Mutex
	var acked []ackedRecord
	var failed []error
	var produced atomic.Bool
	seen := map[string]bool{}
	committed := map[int32]int64{}
	consumerDone := make(chan any, 1)
	go func() {
		defer func() { consumerDone <- recover() }()
		clusterMovesConsume(c, seeds, &mu, &acked, &produced, seen, committed)
	}()

	producer := c.Client(seeds,
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MetadataMaxAge(time.Second),
		kgo.ProducerLinger(2*time.Millisecond),
	)
	var announced sync.Once
	for i := 0; i < c.Records; i++ {
		value := fmt.Sprintf("go%d", i)
		record := &kgo.Record{Topic: c.Topic, Partition: int32(i % clusterPartitions), Value: []byte(value)}
		producer.Produce(context.Background(), record, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, err)
				return
			}
			acked = append(acked, ackedRecord{r.Partition, r.Offset, string(r.Value)})
			announced.Do(func() { fmt.Println("PRODUCING") })
		})
		time.Sleep(4 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	flushed := producer.Flush(ctx)
	cancel()
	producer.Close()
	produced.Store(true)
	if r := <-consumerDone; r != nil {
		panic(r)
	}
	must(flushed, "flushing")
	mu.Lock()
	defer mu.Unlock()
	var out strings.Builder
	for _, a := range acked {
		fmt.Fprintf(&out, "ACKED %d %d %s\n", a.partition, a.offset, a.value)
	}
	partitions := make([]int, 0, len(committed))
	for p := range committed {
		partitions = append(partitions, int(p))
	}
	sort.Ints(partitions)
	for _, p := range partitions {
		fmt.Fprintf(&out, "COMMITTED %d %d\n", p, committed[int32(p)])
	}
	fmt.Print(out.String())
	check(len(failed) == 0, "%d records failed, first: %v", len(failed), failed)
	checkEq(c.Records, len(acked), "acknowledged records")
}

// clusterMovesConsume reads the topic in the group, committing what each poll returned, until
// the producer is done and every record it acknowledged has been read.
func clusterMovesConsume(c *Ctx, seeds kgo.Opt, mu *sync.Mutex, acked *[]ackedRecord, produced *atomic.Bool,
	seen map[string]bool, committed map[int32]int64) {
	// Read but not yet committed: a commit that failed is retried with the next one, for the
	// partitions still assigned (guarded by mu, as the rebalance callbacks change it).
	uncommitted := map[int32]kgo.EpochOffset{}
	forget := func(_ context.Context, _ *kgo.Client, gone map[string][]int32) {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range gone[c.Topic] {
			delete(uncommitted, p)
		}
	}
	cl := c.Client(seeds,
		kgo.OnPartitionsRevoked(forget),
		kgo.OnPartitionsLost(forget),
		kgo.ConsumerGroup(c.Group),
		kgo.ConsumeTopics(c.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.SessionTimeout(10*time.Second),
		kgo.HeartbeatInterval(time.Second),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.MetadataMaxAge(time.Second),
	)
	defer cl.Close()
	var deadline time.Time
	for {
		mu.Lock()
		pending := len(uncommitted)
		mu.Unlock()
		if produced.Load() && pending == 0 {
			if deadline.IsZero() {
				deadline = time.Now().Add(clusterMovesLimit)
			}
			mu.Lock()
			read := 0
			for _, a := range *acked {
				if seen[a.value] {
					read++
				}
			}
			total := len(*acked)
			mu.Unlock()
			if read == total {
				return
			}
			check(time.Now().Before(deadline), "the consumer read %d of the %d acknowledged records", read, total)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fetches := cl.PollFetches(ctx)
		cancel()
		mu.Lock()
		fetches.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)] = true
			uncommitted[r.Partition] = kgo.EpochOffset{Epoch: -1, Offset: r.Offset + 1}
		})
		commit := map[string]map[int32]kgo.EpochOffset{c.Topic: maps.Clone(uncommitted)}
		mu.Unlock()
		if len(commit[c.Topic]) == 0 {
			continue
		}
		ctx, cancel = timeout()
		var commitErr error
		cl.CommitOffsetsSync(ctx, commit, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			commitErr = err
			if err != nil {
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode != 0 {
						commitErr = fmt.Errorf("partition %d: %s", p.Partition, code(p.ErrorCode))
					}
				}
			}
		})
		cancel()
		if commitErr != nil {
			// A rebalance or a coordinator moving under the commit: the records stay read
			// and the next commit carries them, for the partitions still assigned.
			fmt.Fprintln(os.Stderr, "commit retried:", commitErr)
			continue
		}
		mu.Lock()
		for p, o := range commit[c.Topic] {
			committed[p] = o.Offset
			delete(uncommitted, p)
		}
		mu.Unlock()
	}
}
