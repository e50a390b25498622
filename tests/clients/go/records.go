package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var headerChars = []rune("abcdefghijklmnopqrstuvwxyz-_.0123456789éß€日本")

func randBytes(rnd *rand.Rand, n int) []byte {
	b := make([]byte, n)
	rnd.Read(b)
	return b
}

func text(rnd *rand.Rand, n int) []byte {
	words := []string{"kafka ", "stream ", "broker ", "record ", "offset ", "partition ", "batch ", "log "}
	var sb strings.Builder
	for sb.Len() < n {
		sb.WriteString(words[rnd.Intn(len(words))])
	}
	return []byte(sb.String()[:n])
}

// generate builds n random records: keys sometimes nil or empty, values nil, empty, text or
// bytes (a few tens of KiB), 0-4 headers (repeated keys and nil values included), mostly an
// explicit CreateTime from the last hour (the rest are stamped by the client), and an explicit
// partition (the client is configured with the manual partitioner).
func generate(rnd *rand.Rand, topic string, partitions int, n int) []*kgo.Record {
	base := time.Now().Add(-time.Hour + time.Minute)
	out := make([]*kgo.Record, 0, n)
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: topic, Partition: int32(rnd.Intn(partitions))}
		switch k := rnd.Intn(100); {
		case k < 8:
			r.Key = nil
		case k < 13:
			r.Key = []byte{}
		default:
			r.Key = randBytes(rnd, 1+rnd.Intn(64))
		}
		switch v := rnd.Intn(100); {
		case v < 4:
			r.Value = nil
		case v < 9:
			r.Value = []byte{}
		case v < 50:
			r.Value = text(rnd, 1+rnd.Intn(2048))
		case v < 95:
			r.Value = randBytes(rnd, 1+rnd.Intn(1024))
		default:
			if rnd.Intn(2) == 0 {
				r.Value = text(rnd, 8192+rnd.Intn(57344))
			} else {
				r.Value = randBytes(rnd, 8192+rnd.Intn(24576))
			}
		}
		for h, nh := 0, rnd.Intn(5); h < nh; h++ {
			var key string
			if h > 0 && rnd.Intn(100) < 15 {
				key = r.Headers[0].Key
			} else {
				kr := make([]rune, rnd.Intn(17))
				for j := range kr {
					kr[j] = headerChars[rnd.Intn(len(headerChars))]
				}
				key = string(kr)
			}
			var val []byte
			if rnd.Intn(100) >= 10 {
				val = randBytes(rnd, rnd.Intn(48))
			}
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: key, Value: val})
		}
		if rnd.Intn(100) < 70 {
			r.Timestamp = time.UnixMilli(base.UnixMilli() + int64(i)*7 + int64(rnd.Intn(5)))
		}
		out = append(out, r)
	}
	return out
}

// sent is a record as produced, with a copy of what was sent (the client fills in fields of the
// record it was handed).
type sent struct {
	key, value []byte
	headers    []kgo.RecordHeader
	explicitTs time.Time
	rec        *kgo.Record // Partition, Offset, Timestamp as filled in by the client
}

func snapshot(recs []*kgo.Record) []sent {
	out := make([]sent, len(recs))
	for i, r := range recs {
		out[i] = sent{key: r.Key, value: r.Value, headers: append([]kgo.RecordHeader(nil), r.Headers...),
			explicitTs: r.Timestamp, rec: r}
	}
	return out
}

// produceSync produces recs with cl, waits for all, and fails on any error.
func produceSync(cl *kgo.Client, recs []*kgo.Record, what string) []sent {
	s := snapshot(recs)
	ctx, cancel := context.WithTimeout(context.Background(), 2*opTimeout)
	defer cancel()
	for i, res := range cl.ProduceSync(ctx, recs...) {
		if res.Err != nil {
			failf("%s: producing record %d: %v", what, i, res.Err)
		}
	}
	return s
}

// consume reads exactly want records from the given start offsets (bounded), then keeps polling
// briefly to catch extra records.
func consume(c *Ctx, topic string, partitions int, start map[int32]int64, want int, opts ...kgo.Opt) []*kgo.Record {
	offsets := map[int32]kgo.Offset{}
	for p := 0; p < partitions; p++ {
		if at, ok := start[int32(p)]; ok {
			offsets[int32(p)] = kgo.NewOffset().At(at)
		} else {
			offsets[int32(p)] = kgo.NewOffset().AtStart()
		}
	}
	cl := c.Client(append([]kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets})}, opts...)...)
	defer cl.Close()
	return pollExactly(cl, want, 90*time.Second, 300*time.Millisecond)
}

func pollExactly(cl *kgo.Client, want int, limit, settle time.Duration) []*kgo.Record {
	var out []*kgo.Record
	deadline := time.Now().Add(limit)
	poll := func(d time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		fs := cl.PollFetches(ctx)
		for _, e := range fs.Errors() {
			if e.Err == context.DeadlineExceeded || e.Err == context.Canceled {
				continue
			}
			failf("fetch error on %s[%d]: %v", e.Topic, e.Partition, e.Err)
		}
		out = append(out, fs.Records()...)
	}
	for len(out) < want && time.Now().Before(deadline) {
		poll(500 * time.Millisecond)
	}
	check(len(out) >= want, "consumed only %d of %d records within %v", len(out), want, limit)
	for end := time.Now().Add(settle); time.Now().Before(end); {
		poll(100 * time.Millisecond)
	}
	check(len(out) == want, "consumed %d records but expected exactly %d", len(out), want)
	return out
}

// batchInfo says what every consumed batch must carry.
type batchInfo struct {
	codec      int8  // codec the producer used (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd); -1: any
	producerID int64 // -1: not idempotent; -2: any
}

// verify checks consumed against what was sent: per partition in send order, offsets dense from
// startOffset, keys/values/headers byte for byte (nil and empty kept apart), CreateTime equal to
// the producer's, the producer's offsets, a partition leader epoch, the batch's codec and
// producer id.
func verify(what string, s []sent, consumed []*kgo.Record, startOffset int64, bi batchInfo) {
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
	parts := make([]int, 0, len(exp))
	for p := range exp {
		parts = append(parts, int(p))
	}
	sort.Ints(parts)
	for _, pi := range parts {
		p := int32(pi)
		e, g := exp[p], got[p]
		check(len(e) == len(g), "%s: partition %d: produced %d records, consumed %d", what, p, len(e), len(g))
		for i := range e {
			compare(fmt.Sprintf("%s partition %d #%d", what, p, i), e[i], g[i], startOffset+int64(i), bi)
		}
	}
}

func sameBytes(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

func short(b []byte) string {
	if b == nil {
		return "nil"
	}
	if len(b) > 16 {
		return fmt.Sprintf("%x...(%d bytes)", b[:16], len(b))
	}
	return fmt.Sprintf("%x", b)
}

func compare(where string, s sent, r *kgo.Record, wantOffset int64, bi batchInfo) {
	check(r.Offset == wantOffset, "%s: offset %d, expected %d (offsets must be dense)", where, r.Offset, wantOffset)
	if s.rec.Offset >= 0 {
		check(r.Offset == s.rec.Offset, "%s: consumed at offset %d, producer was told %d", where, r.Offset, s.rec.Offset)
	}
	check(sameBytes(s.key, r.Key), "%s: key %s, expected %s", where, short(r.Key), short(s.key))
	check(sameBytes(s.value, r.Value), "%s: value %s, expected %s", where, short(r.Value), short(s.value))
	check(len(s.headers) == len(r.Headers), "%s: %d headers, expected %d", where, len(r.Headers), len(s.headers))
	for h := range s.headers {
		check(s.headers[h].Key == r.Headers[h].Key, "%s: header %d key %q, expected %q", where, h, r.Headers[h].Key, s.headers[h].Key)
		check(sameBytes(s.headers[h].Value, r.Headers[h].Value), "%s: header %d value %s, expected %s",
			where, h, short(r.Headers[h].Value), short(s.headers[h].Value))
	}
	wantTs := s.rec.Timestamp.UnixMilli()
	if !s.explicitTs.IsZero() {
		wantTs = s.explicitTs.UnixMilli()
	}
	check(r.Timestamp.UnixMilli() == wantTs, "%s: timestamp %d, expected %d", where, r.Timestamp.UnixMilli(), wantTs)
	check(r.Attrs.TimestampType() == 0, "%s: timestamp type %d, expected CreateTime (0)", where, r.Attrs.TimestampType())
	check(r.LeaderEpoch >= 0, "%s: batch carries no partition leader epoch (%d)", where, r.LeaderEpoch)
	if bi.codec >= 0 {
		// franz-go sends a batch uncompressed when compression would not make it smaller.
		got := int8(r.Attrs.CompressionType())
		check(got == bi.codec || got == 0, "%s: batch codec %d, the producer used %d", where, got, bi.codec)
	}
	switch {
	case bi.producerID == -1:
		check(r.ProducerID == -1, "%s: producer id %d on a non-idempotent batch", where, r.ProducerID)
	case bi.producerID >= 0:
		check(r.ProducerID == bi.producerID, "%s: producer id %d, expected %d", where, r.ProducerID, bi.producerID)
	}
}
