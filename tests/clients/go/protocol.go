package main

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// The raw-protocol scenario sends hand-built requests (franz-go's kmsg encoders) straight to the
// bootstrap broker and checks exact error codes and response fields that the client libraries
// otherwise hide or retry on.

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// batchSpec describes a hand-built v2 record batch.
type batchSpec struct {
	producerID    int64
	producerEpoch int16
	firstSequence int32
	timestamp     int64
	values        [][]byte
}

// buildBatch encodes an uncompressed magic-2 record batch with a correct CRC-32C.
func buildBatch(b batchSpec) []byte {
	var recs []byte
	for i, v := range b.values {
		var body []byte
		body = append(body, 0)                   // record attributes
		body = kbin.AppendVarlong(body, 0)       // timestamp delta
		body = kbin.AppendVarint(body, int32(i)) // offset delta
		body = kbin.AppendVarintBytes(body, []byte{'k', byte('0' + i%10)})
		body = kbin.AppendVarintBytes(body, v)
		body = kbin.AppendVarint(body, 0) // headers
		recs = kbin.AppendVarint(recs, int32(len(body)))
		recs = append(recs, body...)
	}
	rb := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		LastOffsetDelta:      int32(len(b.values) - 1),
		FirstTimestamp:       b.timestamp,
		MaxTimestamp:         b.timestamp,
		ProducerID:           b.producerID,
		ProducerEpoch:        b.producerEpoch,
		FirstSequence:        b.firstSequence,
		NumRecords:           int32(len(b.values)),
		Records:              recs,
	}
	out := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:12], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:21], crc32.Checksum(out[21:], crc32c))
	return out
}

type rawConn struct {
	c   *Ctx
	cl  *kgo.Client
	v12 *kgo.Client // Produce and Fetch pinned to v12, which name topics instead of using ids
	adm *kadm.Client
}

func (r *rawConn) send(cl *kgo.Client, req kmsg.Request) kmsg.Response {
	ctx, cancel := timeout()
	defer cancel()
	brokers := cl.SeedBrokers()
	check(len(brokers) > 0, "no seed broker")
	resp, err := brokers[0].RetriableRequest(ctx, req)
	must(err, fmt.Sprintf("request key %d", req.Key()))
	return resp
}

func (r *rawConn) produce(topic string, id [16]byte, partition int32, batch []byte) kmsg.ProduceResponseTopicPartition {
	p, _ := r.produceWith(r.cl, topic, id, partition, batch)
	return p
}

func (r *rawConn) produceWith(cl *kgo.Client, topic string, id [16]byte, partition int32, batch []byte) (kmsg.ProduceResponseTopicPartition, int16) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 15000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = topic
	t.TopicID = id
	p := kmsg.NewProduceRequestTopicPartition()
	p.Partition = partition
	p.Records = batch
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp := r.send(cl, req).(*kmsg.ProduceResponse)
	check(len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1, "produce response shape: %+v", resp.Topics)
	return resp.Topics[0].Partitions[0], resp.Version
}

type fetchArgs struct {
	topic        string
	id           [16]byte
	partition    int32
	offset       int64
	epoch        int32
	maxWaitMs    int32
	minBytes     int32
	maxBytes     int32
	partMaxBytes int32
	byName       bool // pin Fetch v12 (topic names)
}

func (r *rawConn) fetch(a fetchArgs) (kmsg.FetchResponseTopicPartition, int16) {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = a.maxWaitMs
	req.MinBytes = a.minBytes
	req.MaxBytes = a.maxBytes
	req.SessionEpoch = -1
	t := kmsg.NewFetchRequestTopic()
	t.Topic = a.topic
	t.TopicID = a.id
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition = a.partition
	p.FetchOffset = a.offset
	p.CurrentLeaderEpoch = a.epoch
	p.PartitionMaxBytes = a.partMaxBytes
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	cl := r.cl
	if a.byName {
		cl = r.v12
	}
	resp := r.send(cl, req).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		return kmsg.FetchResponseTopicPartition{ErrorCode: resp.ErrorCode}, resp.ErrorCode
	}
	check(len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1, "fetch response shape: %d topics", len(resp.Topics))
	return resp.Topics[0].Partitions[0], resp.Version
}

func code(c int16) string {
	if c == 0 {
		return "NONE(0)"
	}
	return fmt.Sprintf("%v(%d)", kerr.ErrorForCode(c), c)
}

func checkCode(want error, got int16, what string) {
	if want == nil {
		check(got == 0, "%s: expected no error but got %s", what, code(got))
		return
	}
	check(kerr.ErrorForCode(got) == want, "%s: expected %v but got %s", what, want, code(got))
}

// decodeBatches splits a fetch response's record set into complete batches.
func decodeBatches(raw []byte) []kmsg.RecordBatch {
	var out []kmsg.RecordBatch
	for len(raw) >= 12 {
		n := int(binary.BigEndian.Uint32(raw[8:12])) + 12
		if n > len(raw) {
			break // a trailing partial batch is allowed
		}
		var b kmsg.RecordBatch
		must(b.ReadFrom(raw[:n]), "decoding a fetched record batch")
		check(crc32.Checksum(raw[21:n], crc32c) == uint32(b.CRC), "fetched batch at offset %d has a bad CRC", b.FirstOffset)
		out = append(out, b)
		raw = raw[n:]
	}
	return out
}

// protocol: exact error codes and fields, with hand-built requests:
//   - ApiVersions lists every API the three client suites use;
//   - Metadata for a missing topic without auto-create: UNKNOWN_TOPIC_OR_PARTITION; with it: created;
//   - Produce to a missing topic or partition: UNKNOWN_TOPIC_OR_PARTITION; a bad CRC: CORRUPT_MESSAGE;
//   - Fetch of a missing topic (v12 by name: UNKNOWN_TOPIC_OR_PARTITION; v13+ by id: UNKNOWN_TOPIC_ID),
//     of a missing partition, below the log start / past the end (OFFSET_OUT_OF_RANGE), at the
//     end with a max wait (empty, no error), with 1-byte limits (one whole batch), with a future
//     leader epoch (UNKNOWN_LEADER_EPOCH);
//   - OffsetForLeaderEpoch for the current epoch (end offset = log end) and a future one;
//   - InitProducerId and idempotent de-duplication: a resent batch is acknowledged with its
//     original offset and not appended again; a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER; a
//     bumped epoch restarts at sequence 0 and fences the old epoch (INVALID_PRODUCER_EPOCH).
func protocol(c *Ctx) {
	rnd := c.Rnd("protocol")
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(0, 12)
	vs.SetMaxKeyVersion(1, 12)
	r := &rawConn{c: c, cl: c.Client(), v12: c.Client(kgo.MaxVersions(vs))}
	defer r.cl.Close()
	defer r.v12.Close()
	r.adm = kadm.NewClient(r.cl)

	// ApiVersions.
	avr := kmsg.NewPtrApiVersionsRequest()
	avr.ClientSoftwareName = "kaas-compat-go"
	avr.ClientSoftwareVersion = "1.0"
	av := r.send(r.cl, avr).(*kmsg.ApiVersionsResponse)
	checkCode(nil, av.ErrorCode, "ApiVersions")
	have := map[int16][2]int16{}
	for _, k := range av.ApiKeys {
		have[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	need := map[int16]string{0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 18: "ApiVersions",
		19: "CreateTopics", 20: "DeleteTopics", 21: "DeleteRecords", 22: "InitProducerId",
		23: "OffsetForLeaderEpoch", 32: "DescribeConfigs", 37: "CreatePartitions", 44: "IncrementalAlterConfigs",
		60: "DescribeCluster"}
	var keys []int
	for k := range need {
		keys = append(keys, int(k))
	}
	sort.Ints(keys)
	var summary []string
	for _, k := range keys {
		v, ok := have[int16(k)]
		check(ok, "ApiVersions does not list %s (key %d)", need[int16(k)], k)
		summary = append(summary, fmt.Sprintf("%s %d-%d", need[int16(k)], v[0], v[1]))
	}
	fmt.Printf("  ApiVersions: %s\n", strings.Join(summary, ", "))

	// Metadata: missing topic without / with auto-creation.
	missing := uniqueTopic("raw-missing")
	meta := func(topic string, auto bool) kmsg.MetadataResponseTopic {
		req := kmsg.NewPtrMetadataRequest()
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, t)
		req.AllowAutoTopicCreation = auto
		resp := r.send(r.cl, req).(*kmsg.MetadataResponse)
		check(len(resp.Topics) == 1, "Metadata returned %d topics", len(resp.Topics))
		return resp.Topics[0]
	}
	checkCode(kerr.UnknownTopicOrPartition, meta(missing, false).ErrorCode, "Metadata without auto-create of a missing topic")
	auto := uniqueTopic("raw-auto")
	first := meta(auto, true)
	fmt.Printf("  Metadata with auto-create, first answer for a new topic: %s, %d partitions\n",
		code(first.ErrorCode), len(first.Partitions))
	check(first.ErrorCode == 0 || kerr.ErrorForCode(first.ErrorCode) == kerr.LeaderNotAvailable ||
		kerr.ErrorForCode(first.ErrorCode) == kerr.UnknownTopicOrPartition,
		"Metadata with auto-create of a new topic: %s", code(first.ErrorCode))
	waitUntil("the auto-created topic", opTimeout, func() bool {
		t := meta(auto, false)
		return t.ErrorCode == 0 && len(t.Partitions) >= 1 && t.Partitions[0].Leader >= 0
	})

	// A topic to work on.
	topic := uniqueTopic("raw")
	cr := createTopic(r.adm, topic, 1, nil)
	id := [16]byte(cr.ID)
	tm := meta(topic, false)
	epoch := tm.Partitions[0].LeaderEpoch
	check(epoch >= 0, "leader epoch %d in Metadata", epoch)
	check([16]byte(tm.TopicID) == id, "Metadata topic id differs from CreateTopics")

	// Produce errors.
	now := time.Now().UnixMilli()
	plain := func(n int) []byte {
		vals := make([][]byte, n)
		for i := range vals {
			vals[i] = randBytes(rnd, 20)
		}
		return buildBatch(batchSpec{producerID: -1, producerEpoch: -1, firstSequence: -1, timestamp: now, values: vals})
	}
	var randomID [16]byte
	rnd.Read(randomID[:])
	pp, v := r.produceWith(r.v12, missing, randomID, 0, plain(1))
	checkEq(int16(12), v, "pinned Produce version")
	checkCode(kerr.UnknownTopicOrPartition, pp.ErrorCode, "Produce v12 to a missing topic")
	if have[0][1] >= 13 {
		pp, v = r.produceWith(r.cl, missing, randomID, 0, plain(1))
		checkCode(kerr.UnknownTopicID, pp.ErrorCode, fmt.Sprintf("Produce v%d to an unknown topic id", v))
	}
	for _, cl := range []*kgo.Client{r.v12, r.cl} {
		pp, v = r.produceWith(cl, topic, id, 5, plain(1))
		checkCode(kerr.UnknownTopicOrPartition, pp.ErrorCode, fmt.Sprintf("Produce v%d to partition 5 of a 1-partition topic", v))
	}
	bad := plain(2)
	bad[len(bad)-1] ^= 0xff
	checkCode(kerr.CorruptMessage, r.produce(topic, id, 0, bad).ErrorCode, "Produce of a batch with a bad CRC")

	// Ten plain records at offsets 0-9.
	for i := 0; i < 2; i++ {
		p := r.produce(topic, id, 0, plain(5))
		checkCode(nil, p.ErrorCode, "Produce")
		checkEq(int64(i*5), p.BaseOffset, "base offset of plain batch")
		checkEq(int64(0), p.LogStartOffset, "log start offset in Produce response")
	}

	// Fetch errors.
	fp, v := r.fetch(fetchArgs{topic: missing, id: randomID, epoch: -1, maxBytes: 1 << 20, partMaxBytes: 1 << 20, byName: true})
	checkEq(int16(12), v, "pinned Fetch version")
	checkCode(kerr.UnknownTopicOrPartition, fp.ErrorCode, "Fetch v12 of a missing topic")
	if have[1][1] >= 13 {
		fp, v = r.fetch(fetchArgs{topic: missing, id: randomID, epoch: -1, maxBytes: 1 << 20, partMaxBytes: 1 << 20})
		checkCode(kerr.UnknownTopicID, fp.ErrorCode, fmt.Sprintf("Fetch v%d of an unknown topic id", v))
	}
	for _, byName := range []bool{true, false} {
		fp, v = r.fetch(fetchArgs{topic: topic, id: id, partition: 3, epoch: -1, maxBytes: 1 << 20, partMaxBytes: 1 << 20, byName: byName})
		checkCode(kerr.UnknownTopicOrPartition, fp.ErrorCode, fmt.Sprintf("Fetch v%d of partition 3 of a 1-partition topic", v))
	}

	// Long poll at the end: empty answer without error, watermarks set.
	fp, _ = r.fetch(fetchArgs{topic: topic, id: id, offset: 10, epoch: epoch, maxWaitMs: 500, minBytes: 1, maxBytes: 1 << 20, partMaxBytes: 1 << 20})
	checkCode(nil, fp.ErrorCode, "Fetch at the log end")
	checkEq(0, len(fp.RecordBatches), "record bytes at the log end")
	checkEq(int64(10), fp.HighWatermark, "high watermark")
	checkEq(int64(10), fp.LastStableOffset, "last stable offset")
	checkEq(int64(0), fp.LogStartOffset, "log start offset")

	// Byte limits of 1: the first whole batch still comes back.
	fp, _ = r.fetch(fetchArgs{topic: topic, id: id, offset: 0, epoch: epoch, maxBytes: 1, partMaxBytes: 1})
	checkCode(nil, fp.ErrorCode, "Fetch with 1-byte limits")
	bs := decodeBatches(fp.RecordBatches)
	check(len(bs) >= 1, "Fetch with 1-byte limits returned no whole batch (%d bytes)", len(fp.RecordBatches))
	checkEq(int64(0), bs[0].FirstOffset, "first batch offset")
	checkEq(int32(5), bs[0].NumRecords, "records in first batch")
	checkEq(epoch, bs[0].PartitionLeaderEpoch, "partition leader epoch stamped on the stored batch")
	// Fetch from the middle of a batch returns that whole batch (starting before the offset).
	fp, _ = r.fetch(fetchArgs{topic: topic, id: id, offset: 7, epoch: epoch, maxBytes: 1 << 20, partMaxBytes: 1 << 20})
	bs = decodeBatches(fp.RecordBatches)
	check(len(bs) == 1 && bs[0].FirstOffset == 5, "Fetch at offset 7: batches %v", len(bs))

	// Leader epochs.
	fp, _ = r.fetch(fetchArgs{topic: topic, id: id, offset: 0, epoch: epoch + 1, maxBytes: 1 << 20, partMaxBytes: 1 << 20})
	checkCode(kerr.UnknownLeaderEpoch, fp.ErrorCode, "Fetch with a future current_leader_epoch")
	ofe := func(current, leader int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = -1
		t := kmsg.NewOffsetForLeaderEpochRequestTopic()
		t.Topic = topic
		p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		p.Partition = 0
		p.CurrentLeaderEpoch = current
		p.LeaderEpoch = leader
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		resp := r.send(r.cl, req).(*kmsg.OffsetForLeaderEpochResponse)
		return resp.Topics[0].Partitions[0]
	}
	oe := ofe(epoch, epoch)
	checkCode(nil, oe.ErrorCode, "OffsetForLeaderEpoch of the current epoch")
	checkEq(epoch, oe.LeaderEpoch, "OffsetForLeaderEpoch leader epoch")
	checkEq(int64(10), oe.EndOffset, "OffsetForLeaderEpoch end offset of the current epoch")
	oe = ofe(-1, epoch)
	checkCode(nil, oe.ErrorCode, "OffsetForLeaderEpoch without current epoch")
	checkEq(int64(10), oe.EndOffset, "OffsetForLeaderEpoch end offset (no current epoch)")
	checkCode(kerr.UnknownLeaderEpoch, ofe(epoch+1, epoch).ErrorCode, "OffsetForLeaderEpoch with a future current epoch")

	// Offsets out of range, below the log start after DeleteRecords and past the end.
	ctx, cancel := timeout()
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 5, LeaderEpoch: -1})
	dr, err := r.adm.DeleteRecords(ctx, os)
	cancel()
	must(err, "DeleteRecords")
	must(dr.Error(), "DeleteRecords")
	for _, off := range []int64{0, 4, 11} {
		fp, _ = r.fetch(fetchArgs{topic: topic, id: id, offset: off, epoch: epoch, maxBytes: 1 << 20, partMaxBytes: 1 << 20})
		checkCode(kerr.OffsetOutOfRange, fp.ErrorCode, fmt.Sprintf("Fetch at offset %d (log 5-10)", off))
		// Kafka answers an error partition with high watermark, last stable offset and log
		// start offset all -1; clients ignore them, so they are not checked.
	}
	fp, _ = r.fetch(fetchArgs{topic: topic, id: id, offset: 5, epoch: epoch, maxBytes: 1 << 20, partMaxBytes: 1 << 20})
	checkCode(nil, fp.ErrorCode, "Fetch at the new log start")
	bs = decodeBatches(fp.RecordBatches)
	check(len(bs) >= 1 && bs[0].FirstOffset == 5, "Fetch at the new log start: first batch at %v", bs)

	idempotentProduce(r, rnd, topic, id)
}

func idempotentProduce(r *rawConn, rnd *rand.Rand, topic string, id [16]byte) {
	initPid := func() (int64, int16) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionTimeoutMillis = 60000
		var resp *kmsg.InitProducerIDResponse
		waitUntil("InitProducerId", opTimeout, func() bool {
			resp = r.send(r.cl, req).(*kmsg.InitProducerIDResponse)
			retriable := kerr.ErrorForCode(resp.ErrorCode)
			return resp.ErrorCode == 0 || !kerr.IsRetriable(retriable)
		})
		checkCode(nil, resp.ErrorCode, "InitProducerId")
		check(resp.ProducerID >= 0 && resp.ProducerEpoch >= 0, "InitProducerId gave %d/%d", resp.ProducerID, resp.ProducerEpoch)
		return resp.ProducerID, resp.ProducerEpoch
	}
	pid, pepoch := initPid()
	pid2, _ := initPid()
	check(pid2 != pid, "two InitProducerId calls gave the same producer id %d", pid)

	topic2 := uniqueTopic("raw-idem")
	cr := createTopic(r.adm, topic2, 1, nil)
	id2 := [16]byte(cr.ID)
	now := time.Now().UnixMilli()
	mk := func(p int64, e int16, seq int32, n int) []byte {
		vals := make([][]byte, n)
		for i := range vals {
			vals[i] = randBytes(rnd, 16)
		}
		return buildBatch(batchSpec{producerID: p, producerEpoch: e, firstSequence: seq, timestamp: now, values: vals})
	}
	b0 := mk(pid, pepoch, 0, 3)
	p := r.produce(topic2, id2, 0, b0)
	checkCode(nil, p.ErrorCode, "idempotent Produce seq 0")
	checkEq(int64(0), p.BaseOffset, "base offset of seq 0")
	b1 := mk(pid, pepoch, 3, 2)
	p = r.produce(topic2, id2, 0, b1)
	checkCode(nil, p.ErrorCode, "idempotent Produce seq 3")
	checkEq(int64(3), p.BaseOffset, "base offset of seq 3")

	// Resending either batch is acknowledged with its original offset and appends nothing.
	p = r.produce(topic2, id2, 0, b0)
	checkCode(nil, p.ErrorCode, "resent batch seq 0 (duplicate)")
	checkEq(int64(0), p.BaseOffset, "base offset reported for a duplicate of seq 0")
	p = r.produce(topic2, id2, 0, b1)
	checkCode(nil, p.ErrorCode, "resent batch seq 3 (duplicate)")
	checkEq(int64(3), p.BaseOffset, "base offset reported for a duplicate of seq 3")

	// A gap in the sequence.
	p = r.produce(topic2, id2, 0, mk(pid, pepoch, 7, 1))
	checkCode(kerr.OutOfOrderSequenceNumber, p.ErrorCode, "idempotent Produce with a sequence gap (5 expected, 7 sent)")

	// The next in-order batch, then a second producer interleaved.
	p = r.produce(topic2, id2, 0, mk(pid, pepoch, 5, 1))
	checkCode(nil, p.ErrorCode, "idempotent Produce seq 5")
	checkEq(int64(5), p.BaseOffset, "base offset of seq 5")
	p = r.produce(topic2, id2, 0, mk(pid2, 0, 0, 2))
	checkCode(nil, p.ErrorCode, "second producer seq 0")
	checkEq(int64(6), p.BaseOffset, "base offset of second producer's batch")

	// An epoch bump restarts the sequence at 0 and fences the old epoch.
	p = r.produce(topic2, id2, 0, mk(pid, pepoch+1, 0, 1))
	checkCode(nil, p.ErrorCode, "idempotent Produce with a bumped epoch at seq 0")
	checkEq(int64(8), p.BaseOffset, "base offset after the epoch bump")
	p = r.produce(topic2, id2, 0, mk(pid, pepoch, 6, 1))
	checkCode(kerr.InvalidProducerEpoch, p.ErrorCode, "idempotent Produce with the old epoch")

	// Nine records in the log: 3 + 2 + 1 + 2 + 1, each batch once.
	fp, _ := r.fetch(fetchArgs{topic: topic2, id: id2, epoch: -1, maxBytes: 1 << 20, partMaxBytes: 1 << 20})
	checkCode(nil, fp.ErrorCode, "Fetch of the idempotent topic")
	checkEq(int64(9), fp.HighWatermark, "high watermark after de-duplication")
	bs := decodeBatches(fp.RecordBatches)
	want := []struct {
		off int64
		pid int64
		ep  int16
		seq int32
		n   int32
	}{{0, pid, pepoch, 0, 3}, {3, pid, pepoch, 3, 2}, {5, pid, pepoch, 5, 1}, {6, pid2, 0, 0, 2}, {8, pid, pepoch + 1, 0, 1}}
	checkEq(len(want), len(bs), "batches stored")
	for i, w := range want {
		b := bs[i]
		check(b.FirstOffset == w.off && b.ProducerID == w.pid && b.ProducerEpoch == w.ep && b.FirstSequence == w.seq && b.NumRecords == w.n,
			"stored batch %d: offset %d pid %d epoch %d seq %d n %d; expected %+v",
			i, b.FirstOffset, b.ProducerID, b.ProducerEpoch, b.FirstSequence, b.NumRecords, w)
	}
}
