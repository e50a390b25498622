package main

import (
	"context"
	"fmt"
	"math/rand"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Transactions with franz-go, which uses Transactions V2 (KIP-890: partitions join the
// transaction with the first Produce, EndTxn bumps the producer epoch) when the broker
// finalizes transaction.version 2, and V1 (AddPartitionsToTxn) otherwise.

func uniqueTxnID(name string) string {
	return fmt.Sprintf("go-txn-%s-%010x", name, rand.Int63()&0xffffffffff)
}

// stableOffsets returns the read_committed end offsets (last stable offsets) of every partition.
func stableOffsets(adm *kadm.Client, topic string) map[int32]int64 {
	ctx, cancel := timeout()
	defer cancel()
	offs, err := adm.ListCommittedOffsets(ctx, topic)
	must(err, "ListCommittedOffsets")
	must(offs.Error(), "ListCommittedOffsets")
	out := map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

func sameOffsets(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for p, o := range a {
		if bo, ok := b[p]; !ok || bo != o {
			return false
		}
	}
	return true
}

// waitStable waits until the last stable offsets equal the high watermarks (all markers
// written) and returns them.
func waitStable(adm *kadm.Client, topic string) map[int32]int64 {
	var lso, hw map[int32]int64
	defer func() {
		if r := recover(); r != nil {
			failf("%v (read_committed %v, read_uncommitted %v)", r, lso, hw)
		}
	}()
	waitUntil("the last stable offsets of "+topic+" to reach the high watermarks", opTimeout, func() bool {
		lso = stableOffsets(adm, topic)
		hw = endOffsets(adm, topic)
		return sameOffsets(lso, hw)
	})
	return hw
}

func describeTxn(adm *kadm.Client, txnID string) kadm.DescribedTransaction {
	ctx, cancel := timeout()
	defer cancel()
	ds, err := adm.DescribeTransactions(ctx, txnID)
	must(err, "DescribeTransactions "+txnID)
	d, ok := ds[txnID]
	check(ok, "DescribeTransactions does not describe %s", txnID)
	must(d.Err, "DescribeTransactions "+txnID)
	return d
}

func waitTxnState(adm *kadm.Client, txnID, state string) kadm.DescribedTransaction {
	var d kadm.DescribedTransaction
	defer func() {
		if r := recover(); r != nil {
			failf("%v (last state %s)", r, d.State)
		}
	}()
	waitUntil("transaction "+txnID+" to reach "+state, opTimeout, func() bool {
		d = describeTxn(adm, txnID)
		return d.State == state
	})
	return d
}

// verifyAt compares consumed transactional records with the sent ones: per partition in send
// order, each at the offset the producer was told (markers leave gaps), byte for byte, in a
// transactional batch of the given producer.
func verifyAt(what string, s []sent, consumed []*kgo.Record, pid int64) {
	exp := map[int32][]sent{}
	for _, x := range s {
		exp[x.rec.Partition] = append(exp[x.rec.Partition], x)
	}
	got := map[int32][]*kgo.Record{}
	for _, r := range consumed {
		got[r.Partition] = append(got[r.Partition], r)
	}
	for p := range got {
		_, ok := exp[p]
		check(ok, "%s: records consumed from partition %d, which was not produced to", what, p)
	}
	for p, e := range exp {
		g := got[p]
		check(len(e) == len(g), "%s: partition %d: expected %d records, consumed %d", what, p, len(e), len(g))
		for i := range e {
			where := fmt.Sprintf("%s partition %d #%d", what, p, i)
			compare(where, e[i], g[i], e[i].rec.Offset, batchInfo{codec: -1, producerID: pid})
			check(g[i].Attrs.IsTransactional(), "%s: batch not marked transactional", where)
		}
	}
}

// txnCommitAbort: a committed transaction over three partitions, an aborted one and another
// committed one (random keys, values, headers), ended with EndTransaction(TryCommit/TryAbort).
// A ReadCommitted() consumer sees exactly the committed records at the offsets the producer was
// told, a read_uncommitted one all of them; while the third transaction is open the last stable
// offsets are its first offsets; afterwards they equal the high watermarks, which count one
// marker per transaction and partition. Each transaction end bumps the producer epoch (V2).
func txnCommitAbort(c *Ctx) {
	adm, done := c.Admin()
	defer done()
	topic := uniqueTopic("txn-commit-abort")
	createTopic(adm, topic, 3, nil)
	txnID := uniqueTxnID("commit-abort")
	cl := c.Client(kgo.TransactionalID(txnID), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.TransactionTimeout(60*time.Second))
	defer cl.Close()
	rnd := c.Rnd("txn-commit-abort")
	n := max(30, min(c.Records/10, 200))

	records := func(k int, tag string) []*kgo.Record {
		recs := generate(rnd, topic, 3, k)
		for i, r := range recs {
			if i < 3 {
				r.Partition = int32(i)
			}
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: "txn", Value: []byte(tag)})
		}
		return recs
	}
	end := func(how kgo.TransactionEndTry, what string) {
		ctx, cancel := timeout()
		defer cancel()
		must(cl.EndTransaction(ctx, how), "EndTransaction "+what)
	}
	var epochs []int16

	must(cl.BeginTransaction(), "BeginTransaction")
	first := produceSync(cl, records(n, "first"), "first transaction")
	end(kgo.TryCommit, "commit")
	epochs = append(epochs, waitTxnState(adm, txnID, "CompleteCommit").ProducerEpoch)

	must(cl.BeginTransaction(), "BeginTransaction")
	aborted := produceSync(cl, records(n/2, "aborted"), "aborted transaction")
	end(kgo.TryAbort, "abort")
	epochs = append(epochs, waitTxnState(adm, txnID, "CompleteAbort").ProducerEpoch)

	before := waitStable(adm, topic)
	must(cl.BeginTransaction(), "BeginTransaction")
	third := produceSync(cl, records(n, "third"), "third transaction")
	firstOff, lastOff := map[int32]int64{}, map[int32]int64{}
	for _, s := range third {
		p, o := s.rec.Partition, s.rec.Offset
		if f, ok := firstOff[p]; !ok || o < f {
			firstOff[p] = o
		}
		lastOff[p] = max(lastOff[p], o+1)
	}
	check(sameOffsets(before, firstOff), "first offsets of the open transaction %v, end offsets before it %v", firstOff, before)
	lso := stableOffsets(adm, topic)
	check(sameOffsets(firstOff, lso), "last stable offsets while a transaction is open: %v, expected its first offsets %v", lso, firstOff)
	hw := endOffsets(adm, topic)
	check(sameOffsets(lastOff, hw), "high watermarks while a transaction is open: %v, expected %v", hw, lastOff)
	checkEq("Ongoing", describeTxn(adm, txnID).State, "state of the open transaction")
	end(kgo.TryCommit, "commit")
	epochs = append(epochs, waitTxnState(adm, txnID, "CompleteCommit").ProducerEpoch)
	check(epochs[0] < epochs[1] && epochs[1] < epochs[2],
		"producer epoch after each transaction end should rise (Transactions V2), got %v", epochs)

	ctx, cancel := timeout()
	pid, _, err := cl.ProducerID(ctx)
	cancel()
	must(err, "ProducerID")

	ends := waitStable(adm, topic)
	all := append(append(append([]sent(nil), first...), aborted...), third...)
	want := map[int32]int64{0: 3, 1: 3, 2: 3} // one marker per transaction and partition
	for _, s := range all {
		want[s.rec.Partition]++
	}
	check(sameOffsets(want, ends), "end offsets %v, expected records + markers %v", ends, want)
	committed := append(append([]sent(nil), first...), third...)
	verifyAt("read_committed", committed,
		consume(c, topic, 3, nil, len(committed), kgo.FetchIsolationLevel(kgo.ReadCommitted())), pid)
	verifyAt("read_uncommitted", all, consume(c, topic, 3, nil, len(all)), pid)

	ctx, cancel = timeout()
	defer cancel()
	_, err = adm.DeleteTopics(ctx, topic)
	must(err, "DeleteTopics")
}

// txnGroupSession: consume-transform-produce with kgo.GroupTransactSession, as franz-go's own
// transactional ETL test does it. Half the input is there when the first member starts; the
// second member joins the group (a rebalance) before the other half is produced. Each member
// polls at most 40 records, writes them transformed to the output topic and ends the session's
// transaction; the first member aborts every fourth one on purpose (flushed first, so the
// aborted records are in the log), which must rewind it to the committed offsets. In the end:
// committed transactions processed every input record exactly once, the read_committed output
// holds each input record exactly once in input order per partition, read_uncommitted holds
// everything that was produced, and the group's committed offsets are the input's end offsets.
func txnGroupSession(c *Ctx) {
	adm, done := c.Admin()
	defer done()
	in := uniqueTopic("txn-etl-in")
	out := uniqueTopic("txn-etl-out")
	group := uniqueGroup("txn-etl")
	createTopic(adm, in, 3, nil)
	createTopic(adm, out, 3, nil)
	n := max(120, min(c.Records/2, 1000))
	n -= n % 6

	pcl := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer pcl.Close()
	produceInput := func(from, to int) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			p := i % 3
			recs = append(recs, &kgo.Record{Topic: in, Partition: int32(p), Key: []byte(strconv.Itoa(i)),
				Value: []byte(fmt.Sprintf("in-%d-%d", p, i/3))})
		}
		produceSync(pcl, recs, "input")
	}
	produceInput(0, n/2)

	var (
		processed, produced, aborts, commits atomic.Int64
		stop                                 atomic.Bool
		errMu                                sync.Mutex
		errs                                 []string
		wg                                   sync.WaitGroup
	)
	fail := func(format string, args ...any) {
		errMu.Lock()
		defer errMu.Unlock()
		errs = append(errs, fmt.Sprintf(format, args...))
	}
	failed := func() []string {
		errMu.Lock()
		defer errMu.Unlock()
		return append([]string(nil), errs...)
	}
	member := func(id int) {
		defer wg.Done()
		opts := append(c.baseOpts(),
			kgo.TransactionalID(uniqueTxnID(fmt.Sprintf("etl-%d", id))),
			kgo.TransactionTimeout(30*time.Second),
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(in),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.RequireStableFetchOffsets(),
			kgo.SessionTimeout(groupSessionMs*time.Millisecond),
			kgo.HeartbeatInterval(time.Second),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
		)
		sess, err := kgo.NewGroupTransactSession(opts...)
		if err != nil {
			fail("member %d: NewGroupTransactSession: %v", id, err)
			return
		}
		defer sess.Close()
		round := 0
		for !stop.Load() {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			fs := sess.PollRecords(ctx, 40)
			cancel()
			for _, e := range fs.Errors() {
				if e.Err != context.DeadlineExceeded && e.Err != context.Canceled && e.Err != kgo.ErrClientClosed {
					fail("member %d: fetch error on %s[%d]: %v", id, e.Topic, e.Partition, e.Err)
				}
			}
			recs := fs.Records()
			if len(recs) == 0 {
				continue
			}
			if err := sess.Begin(); err != nil {
				fail("member %d: Begin: %v", id, err)
				return
			}
			for _, r := range recs {
				o := &kgo.Record{Topic: out, Partition: r.Partition, Key: r.Key,
					Value:   append([]byte("out:"), r.Value...),
					Headers: []kgo.RecordHeader{{Key: "src-offset", Value: []byte(strconv.FormatInt(r.Offset, 10))}}}
				sess.Produce(context.Background(), o, func(_ *kgo.Record, err error) {
					if err != nil {
						fail("member %d: produce: %v", id, err)
						return
					}
					produced.Add(1)
				})
			}
			round++
			how := kgo.TryCommit
			if id == 1 && round%4 == 0 {
				how = kgo.TryAbort
				fctx, fcancel := timeout()
				err := sess.Client().Flush(fctx)
				fcancel()
				if err != nil {
					fail("member %d: flush before the abort: %v", id, err)
					return
				}
			}
			ectx, ecancel := timeout()
			committed, err := sess.End(ectx, how)
			ecancel()
			if err != nil {
				fail("member %d: End: %v", id, err)
				return
			}
			if committed {
				commits.Add(1)
				processed.Add(int64(len(recs)))
			} else {
				aborts.Add(1)
			}
		}
	}

	wg.Add(1)
	go member(1)
	waitUntil("the first member to commit some of the input", 60*time.Second, func() bool {
		return processed.Load() > 0 || len(failed()) > 0
	})
	check(len(failed()) == 0, "%v", failed())
	wg.Add(1)
	go member(2)
	waitUntil("both members to be in the group", 60*time.Second, func() bool {
		ctx, cancel := timeout()
		defer cancel()
		gs, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return false
		}
		g := gs[group]
		return g.Err == nil && g.State == "Stable" && len(g.Members) == 2
	})
	produceInput(n/2, n)

	finished := true
	deadline := time.Now().Add(90 * time.Second)
	for processed.Load() < int64(n) && time.Now().Before(deadline) {
		if len(failed()) > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if processed.Load() < int64(n) {
		finished = false
	}
	time.Sleep(time.Second) // nothing more may be processed
	stop.Store(true)
	wg.Wait()
	check(len(failed()) == 0, "%v", failed())
	check(finished, "committed transactions processed %d of %d input records within 90s (%d commits, %d aborts)",
		processed.Load(), n, commits.Load(), aborts.Load())
	checkEq(int64(n), processed.Load(), "input records processed by committed transactions")
	check(aborts.Load() > 0, "no transaction was aborted")

	waitCommittedAtEnd(adm, group, in, opTimeout)
	waitStable(adm, out)
	visible := consume(c, out, 3, nil, n, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	byPart := map[int32][]*kgo.Record{}
	for _, r := range visible {
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
	for p := int32(0); p < 3; p++ {
		rs := byPart[p]
		checkEq(n/3, len(rs), fmt.Sprintf("read_committed output records of partition %d", p))
		for i, r := range rs {
			want := fmt.Sprintf("out:in-%d-%d", p, i)
			check(string(r.Value) == want, "read_committed output partition %d #%d: %q, expected %q (each input record once, in order)",
				p, i, r.Value, want)
			check(len(r.Headers) == 1 && string(r.Headers[0].Value) == strconv.Itoa(i),
				"read_committed output partition %d #%d: headers %v", p, i, r.Headers)
		}
	}
	all := consume(c, out, 3, nil, int(produced.Load()))
	check(len(all) > n, "read_uncommitted output has %d records, no more than the %d committed ones", len(all), n)
	fmt.Printf("  %d input records, %d transactions committed, %d aborted, %d records in the output\n",
		n, commits.Load(), aborts.Load(), len(all))

	ctx, cancel := timeout()
	defer cancel()
	_, err := adm.DeleteTopics(ctx, in, out)
	must(err, "DeleteTopics")
}
