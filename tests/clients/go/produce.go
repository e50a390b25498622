package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

var codecs = []struct {
	name string
	id   int8
	c    kgo.CompressionCodec
}{
	{"none", 0, kgo.NoCompression()},
	{"gzip", 1, kgo.GzipCompression()},
	{"snappy", 2, kgo.SnappyCompression()},
	{"lz4", 3, kgo.Lz4Compression()},
	{"zstd", 4, kgo.ZstdCompression()},
}

// endOffsets returns the end offset of every partition of topic.
func endOffsets(adm *kadm.Client, topic string) map[int32]int64 {
	ctx, cancel := timeout()
	defer cancel()
	offs, err := adm.ListEndOffsets(ctx, topic)
	must(err, "ListEndOffsets")
	must(offs.Error(), "ListEndOffsets")
	out := map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

func countByPartition(s []sent) map[int32]int64 {
	m := map[int32]int64{}
	for _, x := range s {
		m[x.rec.Partition]++
	}
	return m
}

func checkEnd(adm *kadm.Client, topic string, partitions int, s []sent, what string) {
	counts := countByPartition(s)
	end := endOffsets(adm, topic)
	for p := int32(0); p < int32(partitions); p++ {
		checkEq(counts[p], end[p], fmt.Sprintf("%s: end offset of partition %d", what, p))
	}
}

// produceConsume: thousands of random records per codec (none gzip snappy lz4 zstd) and per acks
// setting (the client default, idempotent acks=all; acks=1; acks=0), read back with
// ConsumePartitions and compared byte for byte, including the batch's codec and producer id.
func produceConsume(c *Ctx) {
	adm, done := c.Admin()
	defer done()
	for _, codec := range codecs {
		for _, acks := range []string{"all", "1", "0"} {
			what := fmt.Sprintf("compression=%s acks=%s", codec.name, acks)
			topic := uniqueTopic("pc-" + codec.name + "-" + acks)
			createTopic(adm, topic, 3, nil)
			opts := []kgo.Opt{kgo.ProducerBatchCompression(codec.c), kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.ProducerLinger(5 * time.Millisecond)}
			switch acks {
			case "1":
				opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
			case "0":
				opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
			}
			// The producer stays open until the records were read back (acks=0 confirms nothing).
			func() {
				pcl := c.Client(opts...)
				defer pcl.Close()
				s := produceSync(pcl, generate(c.Rnd(what), topic, 3, c.Records), what)
				bi := batchInfo{codec: codec.id, producerID: -1}
				if acks == "all" {
					ctx, cancel := timeout()
					defer cancel()
					pid, _, err := pcl.ProducerID(ctx)
					must(err, "ProducerID")
					check(pid >= 0, "%s: idempotent producer has producer id %d", what, pid)
					bi.producerID = pid
				}
				if acks == "0" {
					for _, x := range s {
						x.rec.Offset = -1 // nothing was acknowledged
					}
				}
				got := consume(c, topic, 3, nil, len(s))
				verify(what, s, got, 0, bi)
				if codec.id != 0 {
					compressed := 0
					for _, r := range got {
						if int8(r.Attrs.CompressionType()) == codec.id {
							compressed++
						}
					}
					check(compressed > 0, "%s: no consumed batch was %s-compressed", what, codec.name)
				}
				checkEnd(adm, topic, 3, s, what)
			}()
			fmt.Printf("  %s: %d records verified\n", what, c.Records)
		}
	}
}

// fetchLimits: FetchMaxBytes / FetchMaxPartitionBytes far below single record sizes; the broker
// must still return the first batch of each partition so the consumer makes progress.
func fetchLimits(c *Ctx) {
	rnd := c.Rnd("fetch-limits")
	adm, done := c.Admin()
	defer done()
	topic := uniqueTopic("fetch-limits")
	createTopic(adm, topic, 3, nil)
	var recs []*kgo.Record
	for i := 0; i < 300; i++ {
		size := 1 + rnd.Intn(3000)
		if i%10 == 0 {
			size = 200_000 + rnd.Intn(100_000)
		}
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 3), Key: randBytes(rnd, 8), Value: randBytes(rnd, size)})
	}
	pcl := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(20*time.Millisecond))
	s := produceSync(pcl, recs, "fetch-limits")
	pcl.Close()
	bi := batchInfo{codec: 0, producerID: -2}
	verify("tiny fetch limits", s, consume(c, topic, 3, nil, len(s), kgo.FetchMaxBytes(1), kgo.FetchMaxPartitionBytes(1)), 0, bi)
	verify("moderate fetch limits", s, consume(c, topic, 3, nil, len(s), kgo.FetchMaxBytes(100_000),
		kgo.FetchMaxPartitionBytes(40_000)), 0, bi)
}

// longPoll: FetchMinBytes far above what exists with FetchMaxWait 500ms; the broker answers after
// the wait with what it has, and records produced while the consumer waits arrive. Content only.
func longPoll(c *Ctx) {
	rnd := c.Rnd("long-poll")
	adm, done := c.Admin()
	defer done()
	topic := uniqueTopic("long-poll")
	createTopic(adm, topic, 1, nil)
	ccl := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMinBytes(1_000_000), kgo.FetchMaxWait(500*time.Millisecond))
	defer ccl.Close()
	pcl := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer pcl.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	fs := ccl.PollFetches(ctx)
	cancel()
	checkEq(0, len(fs.Records()), "records polled from an empty topic")
	for _, e := range fs.Errors() {
		check(e.Err == context.DeadlineExceeded, "fetch error on an empty topic: %v", e.Err)
	}

	mk := func(n, size int) []*kgo.Record {
		var out []*kgo.Record
		for i := 0; i < n; i++ {
			out = append(out, &kgo.Record{Topic: topic, Partition: 0, Key: randBytes(rnd, 4), Value: randBytes(rnd, size)})
		}
		return out
	}
	first := produceSync(pcl, mk(20, 50), "first")
	verify("small batch under fetch.min.bytes", first, pollExactly(ccl, 20, 20*time.Second, 0), 0, batchInfo{-1, -2})

	later := mk(100, 100)
	var wg sync.WaitGroup
	var laterSent []sent
	var perr any
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() { perr = recover() }()
		for b := 0; b < 5; b++ {
			time.Sleep(250 * time.Millisecond)
			laterSent = append(laterSent, produceSync(pcl, later[b*20:b*20+20], "burst")...)
		}
	}()
	got := pollExactly(ccl, 100, 30*time.Second, 0)
	wg.Wait()
	check(perr == nil, "producing during the long poll failed: %v", perr)
	verify("records produced during the long poll", laterSent, got, 20, batchInfo{-1, -2})
}

// idempotence: the default (idempotent) producer with many small batches, then a second
// client (a new producer id) on the same partitions: dense offsets, no duplicates, and every
// batch carries the producer id the client was given by InitProducerId.
func idempotence(c *Ctx) {
	rnd := c.Rnd("idempotence")
	adm, done := c.Admin()
	defer done()
	topic := uniqueTopic("idempotence")
	createTopic(adm, topic, 3, nil)
	n := max(c.Records, 1000)
	var all []sent
	pids := map[int64]bool{}
	for round := 0; round < 2; round++ {
		pcl := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1024),
			kgo.ProducerLinger(0))
		var recs []*kgo.Record
		for i := 0; i < n; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 3), Key: randBytes(rnd, 6),
				Value: []byte(fmt.Sprintf("round-%d-seq-%06d", round, i))})
		}
		all = append(all, produceSync(pcl, recs, "idempotent round")...)
		ctx, cancel := timeout()
		pid, _, err := pcl.ProducerID(ctx)
		cancel()
		must(err, "ProducerID")
		check(pid >= 0 && !pids[pid], "round %d: producer id %d (seen before: %v)", round, pid, pids[pid])
		pids[pid] = true
		pcl.Close()
	}
	next := map[int32]int64{}
	for _, x := range all {
		checkEq(next[x.rec.Partition], x.rec.Offset, fmt.Sprintf("offset reported for partition %d", x.rec.Partition))
		next[x.rec.Partition]++
	}
	got := consume(c, topic, 3, nil, len(all))
	verify("idempotent producers", all, got, 0, batchInfo{codec: -1, producerID: -2})
	for _, r := range got {
		check(pids[r.ProducerID], "record at %d/%d carries producer id %d, not one the broker handed out", r.Partition, r.Offset, r.ProducerID)
	}
	checkEnd(adm, topic, 3, all, "idempotence")
}

// autoCreate: producing to a missing topic makes the broker create it (Metadata with
// allow_auto_topic_creation=true); kadm's Metadata (allow_auto_topic_creation=false) must not.
func autoCreate(c *Ctx) {
	rnd := c.Rnd("auto-create")
	adm, done := c.Admin()
	defer done()
	topic := uniqueTopic("auto-create")
	pcl := c.Client(kgo.AllowAutoTopicCreation())
	var recs []*kgo.Record
	for i := 0; i < 50; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: randBytes(rnd, 5), Value: randBytes(rnd, 30)})
	}
	s := produceSync(pcl, recs, "auto-create")
	pcl.Close()
	ctx, cancel := timeout()
	td, err := adm.ListTopics(ctx, topic)
	cancel()
	must(err, "ListTopics")
	must(td[topic].Err, "ListTopics "+topic)
	parts := len(td[topic].Partitions)
	check(parts >= 1, "auto-created topic has %d partitions", parts)
	verify("auto-created topic", s, consume(c, topic, parts, nil, len(s)), 0, batchInfo{-1, -2})

	missing := uniqueTopic("not-auto-created")
	for i := 0; i < 2; i++ {
		ctx, cancel := timeout()
		td, err = adm.ListTopics(ctx, missing)
		cancel()
		must(err, "ListTopics of a missing topic")
		checkErr(kerr.UnknownTopicOrPartition, td[missing].Err, "Metadata (no auto-create) of a missing topic")
	}
}
