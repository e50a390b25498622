package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// errorCases: error codes as franz-go (kgo/kadm) reports them.
func errorCases(c *Ctx) {
	adm, done := c.Admin()
	defer done()
	topicErrors(adm)
	unknownTopicErrors(adm)
	messageTooLarge(c, adm)
	offsetOutOfRange(c, adm)
}

func createErr(adm *kadm.Client, topic string, partitions int32, rf int16, configs map[string]*string) error {
	ctx, cancel := timeout()
	defer cancel()
	rs, err := adm.CreateTopics(ctx, partitions, rf, configs, topic)
	must(err, "CreateTopics")
	r, err := rs.On(topic, nil)
	must(err, "CreateTopics response")
	return r.Err
}

func topicErrors(adm *kadm.Client) {
	topic := uniqueTopic("errors")
	createTopic(adm, topic, 3, nil)
	checkErr(kerr.TopicAlreadyExists, createErr(adm, topic, 3, 1, nil), "CreateTopics of an existing topic")
	for _, n := range []int{2, 3} {
		ctx, cancel := timeout()
		rs, err := adm.UpdatePartitions(ctx, n, topic)
		cancel()
		must(err, "CreatePartitions")
		checkErr(kerr.InvalidPartitions, rs.Error(), fmt.Sprintf("CreatePartitions 3 -> %d", n))
	}
	// Kafka refuses a factor above the broker count; kaas keeps no replicas and accepts any
	// positive factor, so only a non-positive one is checked here.
	checkErr(kerr.InvalidReplicationFactor, createErr(adm, uniqueTopic("errors-rf"), 1, 0, nil), "CreateTopics with replication factor 0")
	checkErr(kerr.InvalidPartitions, createErr(adm, uniqueTopic("errors-zero"), 0, 1, nil), "CreateTopics with 0 partitions")
	checkErr(kerr.InvalidTopicException, createErr(adm, fmt.Sprintf("bad/name-%d", time.Now().UnixNano()), 1, 1, nil),
		"CreateTopics with '/' in the name")
	checkErr(kerr.InvalidTopicException, createErr(adm, strings.Repeat("x", 250), 1, 1, nil), "CreateTopics with a 250-character name")
	checkErr(kerr.InvalidConfig, createErr(adm, uniqueTopic("errors-cfg"), 1, 1, map[string]*string{"retention.ms": strp("forever")}),
		"CreateTopics with retention.ms=forever")
	checkErr(kerr.InvalidConfig, alter(adm, topic, false, kadm.AlterConfig{Op: kadm.SetConfig, Name: "no.such.config", Value: strp("1")}),
		"IncrementalAlterConfigs of an unknown config name")
	ctx, cancel := timeout()
	defer cancel()
	vr, err := adm.ValidateCreateTopics(ctx, 2, 1, nil, uniqueTopic("validate-only"))
	must(err, "CreateTopics validate-only")
	must(vr.Error(), "CreateTopics validate-only")
	for name := range vr {
		td, err := adm.ListTopics(ctx, name)
		must(err, "Metadata")
		checkErr(kerr.UnknownTopicOrPartition, td[name].Err, "Metadata of a topic only validated for creation")
	}
	td, err := adm.ListTopics(ctx, topic)
	must(err, "Metadata")
	checkEq(3, len(td[topic].Partitions), "partitions after failed CreatePartitions")
}

func unknownTopicErrors(adm *kadm.Client) {
	missing := uniqueTopic("missing")
	ctx, cancel := timeout()
	defer cancel()
	dt, err := adm.DeleteTopics(ctx, missing)
	must(err, "DeleteTopics")
	checkErr(kerr.UnknownTopicOrPartition, dt.Error(), "DeleteTopics of a missing topic")
	rcs, err := adm.DescribeTopicConfigs(ctx, missing)
	if err == nil {
		rc, e := rcs.On(missing, nil)
		must(e, "DescribeConfigs response")
		err = rc.Err
	}
	checkErr(kerr.UnknownTopicOrPartition, err, "DescribeConfigs of a missing topic")
	checkErr(kerr.UnknownTopicOrPartition, alter(adm, missing, false,
		kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: strp("1000")}), "IncrementalAlterConfigs of a missing topic")
	cp, err := adm.UpdatePartitions(ctx, 4, missing)
	if err == nil {
		err = cp.Error()
	}
	checkErr(kerr.UnknownTopicOrPartition, err, "CreatePartitions of a missing topic")
	td, err := adm.ListTopics(ctx, missing)
	must(err, "Metadata")
	checkErr(kerr.UnknownTopicOrPartition, td[missing].Err, "Metadata of a missing topic after the failed calls")
}

// messageTooLarge: a record bigger than the topic's max.message.bytes (but within the client's
// batch limit) fails with MESSAGE_TOO_LARGE; the producer keeps working and nothing was appended.
func messageTooLarge(c *Ctx, adm *kadm.Client) {
	rnd := c.Rnd("too-large")
	topic := uniqueTopic("too-large")
	createTopic(adm, topic, 1, map[string]*string{"max.message.bytes": strp("10000")})
	pcl := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	defer pcl.Close()
	ctx, cancel := timeout()
	res := pcl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("big"), Value: randBytes(rnd, 20_000)})
	cancel()
	checkErr(kerr.MessageTooLarge, res.FirstErr(), "producing a 20000-byte record to a topic with max.message.bytes=10000")
	s := produceSync(pcl, []*kgo.Record{{Topic: topic, Key: []byte("small"), Value: randBytes(rnd, 5000)}}, "after MESSAGE_TOO_LARGE")
	checkEq(int64(0), s[0].rec.Offset, "offset of the first record that fit")
	verify("after MESSAGE_TOO_LARGE", s, consume(c, topic, 1, nil, 1), 0, batchInfo{-1, -2})
}

// offsetOutOfRange: after DeleteRecords moved the log start to 50, a consumer without a reset
// policy that starts at 0 or 49 (or past the end) gets OFFSET_OUT_OF_RANGE; with reset to the
// start it continues at 50.
func offsetOutOfRange(c *Ctx, adm *kadm.Client) {
	rnd := c.Rnd("out-of-range")
	topic := uniqueTopic("out-of-range")
	createTopic(adm, topic, 1, nil)
	var recs []*kgo.Record
	for i := 0; i < 100; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: randBytes(rnd, 4), Value: randBytes(rnd, 64)})
	}
	pcl := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1024), kgo.ProducerLinger(0))
	s := produceSync(pcl, recs, "out-of-range data")
	pcl.Close()
	ctx, cancel := timeout()
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 50, LeaderEpoch: -1})
	dr, err := adm.DeleteRecords(ctx, os)
	cancel()
	must(err, "DeleteRecords")
	must(dr.Error(), "DeleteRecords before 50")

	for _, at := range []int64{0, 49, 150} {
		cl := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(at)}}),
			kgo.ConsumeResetOffset(kgo.NoResetOffset()))
		var got error
		deadline := time.Now().Add(20 * time.Second)
		for got == nil && time.Now().Before(deadline) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			fs := cl.PollFetches(ctx)
			cancel()
			check(len(fs.Records()) == 0, "consumer at out-of-range offset %d returned %d records", at, len(fs.Records()))
			for _, e := range fs.Errors() {
				if e.Err != context.DeadlineExceeded {
					got = e.Err
				}
			}
		}
		cl.Close()
		checkErr(kerr.OffsetOutOfRange, got, fmt.Sprintf("consuming from offset %d with the log at 50-100", at))
	}
	verify("reset to the start after OFFSET_OUT_OF_RANGE", s[50:],
		consume(c, topic, 1, map[int32]int64{0: 10}, 50, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())), 50, batchInfo{-1, -2})
	verify("consume from the new log start", s[50:], consume(c, topic, 1, map[int32]int64{0: 50}, 50), 50, batchInfo{-1, -2})
}
