// Command faults is the franz-go client of the fault-injection test
// (tests/cluster_fault_schedule.rs): an idempotent producer (acks=all) and a consumer-group
// member, in one process, writing what they did as the event lines of the test's checker
// (tests/support/fault_checker.rs); times are wall-clock milliseconds.
//
//	go build -o faults ./faults
//	./faults -bootstrap H:P,.. -topic T -partitions N -producer go -until STOP -log FILE \
//	         -group G -protocol classic|consumer -member M -consumer-until STOP2 -consumer-log FILE2
//
// The producer sends records round-robin over the partitions, one every -pace-ms, until the
// file -until exists, then flushes (at most 120 s). Send number SEQ (from 0) has the value
// "<producer>-SEQ" and goes to partition SEQ % N; each acknowledgement is "ACK <ms> <producer>
// SEQ <partition> <offset>", each record given up "NACK <ms> <producer> SEQ <partition>
// <error>".
//
// The member (classic protocol, or KIP-848 through kgo.ServerSideBalancer with -protocol
// consumer) reads from the earliest offset, logs each record as "POLL <ms> G M <partition>
// <offset> <value>" and after each poll commits, synchronously, the offset after the last
// record of each partition in it, logging "COMMIT <ms> G M <partition> <offset>" for each
// partition the coordinator accepted. Once -consumer-until exists it goes on until its polls
// have returned nothing for 10 s (at most 120 s).
//
// Prints "PASS faults ..." at the end, or "FAIL <reason>" and exits 1.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// eventLog writes event lines to a file, flushed at least every 200 ms.
type eventLog struct {
	mu      sync.Mutex
	out     *bufio.Writer
	file    *os.File
	flushed time.Time
}

func openLog(path string) *eventLog {
	file, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fail("open %s: %v", path, err)
	}
	return &eventLog{out: bufio.NewWriter(file), file: file, flushed: time.Now()}
}

func (l *eventLog) write(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.out, format+"\n", args...)
	if time.Since(l.flushed) > 200*time.Millisecond {
		l.out.Flush()
		l.flushed = time.Now()
	}
}

func (l *eventLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.out.Flush()
	l.flushed = time.Now()
}

// idleLimit: once told to stop, the member stops when its polls have returned nothing for this
// long (a rebalance can keep a member without partitions for a few seconds).
const idleLimit = 10 * time.Second

func now() int64 { return time.Now().UnixMilli() }

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func fail(format string, args ...any) {
	fmt.Printf("FAIL "+format+"\n", args...)
	os.Exit(1)
}

func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", " ")
}

type options struct {
	bootstrap     []string
	topic         string
	partitions    int
	producer      string
	paceMs        int
	until         string
	log           string
	group         string
	protocol      string
	member        string
	consumerUntil string
	consumerLog   string
}

func main() {
	var o options
	bootstrap := flag.String("bootstrap", "", "brokers host:port,host:port")
	flag.StringVar(&o.topic, "topic", "", "topic")
	flag.IntVar(&o.partitions, "partitions", 6, "partitions of the topic")
	flag.StringVar(&o.producer, "producer", "go", "producer id (the records' value prefix)")
	flag.IntVar(&o.paceMs, "pace-ms", 10, "milliseconds between two sends")
	flag.StringVar(&o.until, "until", "", "the producer stops once this file exists")
	flag.StringVar(&o.log, "log", "", "the producer's event log")
	flag.StringVar(&o.group, "group", "", "consumer group (none: no consumer)")
	flag.StringVar(&o.protocol, "protocol", "classic", "classic or consumer (KIP-848)")
	flag.StringVar(&o.member, "member", "m", "the member's name in the event log")
	flag.StringVar(&o.consumerUntil, "consumer-until", "", "the member stops once this file exists and nothing arrives")
	flag.StringVar(&o.consumerLog, "consumer-log", "", "the member's event log")
	flag.Parse()
	if *bootstrap == "" || o.topic == "" || o.until == "" || o.log == "" {
		fail("-bootstrap, -topic, -until and -log are required")
	}
	o.bootstrap = strings.Split(*bootstrap, ",")
	consumed := make(chan string, 1)
	if o.group != "" {
		if o.consumerUntil == "" || o.consumerLog == "" {
			fail("-group needs -consumer-until and -consumer-log")
		}
		go func() { consumed <- consume(&o) }()
	} else {
		consumed <- "no consumer"
	}
	produced := produce(&o)
	fmt.Printf("PASS faults %s; %s\n", produced, <-consumed)
}

func produce(o *options) string {
	log := openLog(o.log)
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(o.bootstrap...),
		kgo.ClientID("kaas-faults-go"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.MetadataMinAge(200*time.Millisecond),
		kgo.MetadataMaxAge(time.Second),
		// A record is given up only when the cluster stays unavailable for two minutes.
		kgo.RecordDeliveryTimeout(120*time.Second),
	)
	if err != nil {
		fail("producer: %v", err)
	}
	defer cl.Close()
	var mu sync.Mutex
	acked, failed := 0, 0
	seq := 0
	for !exists(o.until) {
		partition := int32(seq % o.partitions)
		mySeq := seq
		record := &kgo.Record{Topic: o.topic, Partition: partition, Value: []byte(fmt.Sprintf("%s-%d", o.producer, seq))}
		cl.Produce(context.Background(), record, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				log.write("NACK %d %s %d %d %s", now(), o.producer, mySeq, partition, oneLine(err))
				return
			}
			acked++
			log.write("ACK %d %s %d %d %d", now(), o.producer, mySeq, r.Partition, r.Offset)
		})
		seq++
		time.Sleep(time.Duration(o.paceMs) * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	err = cl.Flush(ctx)
	cancel()
	log.flush()
	if err != nil {
		fail("producer: records neither acknowledged nor given up after 120 s: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return fmt.Sprintf("sent %d acked %d failed %d", seq, acked, failed)
}

func consume(o *options) string {
	log := openLog(o.consumerLog)
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.bootstrap...),
		kgo.ClientID("kaas-faults-go-member"),
		kgo.ConsumerGroup(o.group),
		kgo.ConsumeTopics(o.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.MetadataMinAge(200 * time.Millisecond),
		kgo.MetadataMaxAge(time.Second),
	}
	if o.protocol == "consumer" {
		opts = append(opts, kgo.ServerSideBalancer())
	} else {
		opts = append(opts, kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(time.Second))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fail("consumer: %v", err)
	}
	defer cl.Close()
	polled, commits, failedCommits := 0, 0, 0
	lastRecord := time.Now()
	var stopSeen time.Time
	for {
		if stopSeen.IsZero() && exists(o.consumerUntil) {
			stopSeen = time.Now()
		}
		if !stopSeen.IsZero() && time.Since(stopSeen) > 120*time.Second {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fetches := cl.PollFetches(ctx)
		cancel()
		if fetches.NumRecords() == 0 && !stopSeen.IsZero() && time.Since(lastRecord) > idleLimit {
			break
		}
		ends := map[int32]int64{}
		fetches.EachRecord(func(r *kgo.Record) {
			polled++
			log.write("POLL %d %s %s %d %d %s", now(), o.group, o.member, r.Partition, r.Offset, r.Value)
			if r.Offset+1 > ends[r.Partition] {
				ends[r.Partition] = r.Offset + 1
			}
		})
		if len(ends) == 0 {
			log.flush()
			continue
		}
		lastRecord = time.Now()
		commit := map[string]map[int32]kgo.EpochOffset{o.topic: {}}
		for p, offset := range ends {
			commit[o.topic][p] = kgo.EpochOffset{Epoch: -1, Offset: offset}
		}
		ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
		cl.CommitOffsetsSync(ctx, commit, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			done := now()
			if err != nil {
				failedCommits++
				log.write("COMMIT-FAILED %d %s %s %s", done, o.group, o.member, oneLine(err))
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode != 0 {
						failedCommits++
						continue
					}
					commits++
					log.write("COMMIT %d %s %s %d %d", done, o.group, o.member, p.Partition, ends[p.Partition])
				}
			}
		})
		cancel()
		log.flush()
	}
	log.flush()
	return fmt.Sprintf("polled %d commits %d failed commits %d", polled, commits, failedCommits)
}
