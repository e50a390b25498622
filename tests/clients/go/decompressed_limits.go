package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// decompressedLimits: as Kafka 4.4 does, the broker bounds a compressed batch by its size on
// the wire (max.message.bytes) and each record by its decompressed size
// (max.decompressed.message.bytes), not the batch's decompressed size. A 3 MiB batch of zeros
// that zstd makes a few KiB is accepted by a topic with the default 1 MiB max.message.bytes and
// read back whole; a topic whose max.decompressed.message.bytes is below one record refuses
// the batch with INVALID_RECORD.
func decompressedLimits(c *Ctx) {
	adm, done := c.Admin()
	defer done()
	topic := uniqueTopic("decompressed")
	createTopic(adm, topic, 1, nil)
	value := make([]byte, 1<<20)
	var recs []*kgo.Record
	for i := 0; i < 3; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i)), Value: value})
	}
	// The client bounds a batch before compression: let it build one 3 MiB batch.
	producer := func() *kgo.Client {
		return c.Client(kgo.ProducerBatchCompression(kgo.ZstdCompression()),
			kgo.ProducerBatchMaxBytes(8<<20), kgo.ProducerLinger(50*time.Millisecond),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	pcl := producer()
	s := produceSync(pcl, recs, "3 MiB batch of zeros, zstd")
	pcl.Close()
	got := consume(c, topic, 1, nil, len(s), kgo.FetchMaxBytes(16<<20), kgo.FetchMaxPartitionBytes(16<<20))
	for i, r := range got {
		check(bytes.Equal(r.Value, value), "record %d read back with %d bytes", i, len(r.Value))
		check(r.Attrs.CompressionType() == 4, "record %d stored with codec %d, not zstd", i, r.Attrs.CompressionType())
	}
	fmt.Printf("  a 3 MiB batch (zstd) on a 1 MiB max.message.bytes topic: accepted and read back\n")

	limited := uniqueTopic("decompressed-limited")
	limit := "100000"
	createTopic(adm, limited, 1, map[string]*string{"max.decompressed.message.bytes": &limit})
	pcl = producer()
	defer pcl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*opTimeout)
	defer cancel()
	res := pcl.ProduceSync(ctx, &kgo.Record{Topic: limited, Value: value})
	check(errors.Is(res[0].Err, kerr.InvalidRecord),
		"a 1 MiB record past max.decompressed.message.bytes=%s: want INVALID_RECORD, got %v", limit, res[0].Err)
	fmt.Printf("  a record past max.decompressed.message.bytes: INVALID_RECORD\n")
}
