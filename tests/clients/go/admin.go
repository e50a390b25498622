package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var topicConfigs = map[string]*string{
	"retention.ms":      strp("3600000"),
	"retention.bytes":   strp("104857600"),
	"segment.bytes":     strp("16777216"),
	"max.message.bytes": strp("2097152"),
	"cleanup.policy":    strp("delete"),
}

func describeConfigs(adm *kadm.Client, topic string) map[string]kadm.Config {
	ctx, cancel := timeout()
	defer cancel()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	must(err, "DescribeConfigs "+topic)
	rc, err := rcs.On(topic, nil)
	must(err, "DescribeConfigs "+topic)
	must(rc.Err, "DescribeConfigs "+topic)
	out := map[string]kadm.Config{}
	for _, c := range rc.Configs {
		out[c.Key] = c
	}
	return out
}

func cfgValue(m map[string]kadm.Config, name string) string {
	c, ok := m[name]
	if !ok {
		return "<missing>"
	}
	return c.MaybeValue()
}

func checkDynamic(cfg map[string]kadm.Config, name, value string) {
	c, ok := cfg[name]
	check(ok, "DescribeConfigs lacks %s", name)
	checkEq(value, c.MaybeValue(), "value of "+name)
	checkEq(kmsg.ConfigSourceDynamicTopicConfig, c.Source, "source of "+name)
	check(!c.Sensitive, "%s reported sensitive", name)
}

func checkNotDynamic(cfg map[string]kadm.Config, name string) {
	c, ok := cfg[name]
	check(ok, "DescribeConfigs lacks %s", name)
	check(c.Source != kmsg.ConfigSourceDynamicTopicConfig, "%s still has a topic override (%s)", name, c.MaybeValue())
	check(c.Value != nil, "%s has no value", name)
}

func alter(adm *kadm.Client, topic string, validate bool, ops ...kadm.AlterConfig) error {
	ctx, cancel := timeout()
	defer cancel()
	var rs kadm.AlterConfigsResponses
	var err error
	if validate {
		rs, err = adm.ValidateAlterTopicConfigs(ctx, ops, topic)
	} else {
		rs, err = adm.AlterTopicConfigs(ctx, ops, topic)
	}
	must(err, "IncrementalAlterConfigs")
	r, err := rs.On(topic, nil)
	must(err, "IncrementalAlterConfigs response")
	return r.Err
}

// adminOps: DescribeCluster, CreateTopics (with configs and with broker defaults), Metadata by
// name and by topic id, DescribeConfigs, IncrementalAlterConfigs (SET, DELETE, validate-only, an
// invalid value), CreatePartitions, DeleteTopics.
func adminOps(c *Ctx) {
	cl := c.Client()
	defer cl.Close()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(opTimeout / time.Millisecond))
	port, _ := strconv.Atoi(c.Bootstrap[strings.LastIndex(c.Bootstrap, ":")+1:])

	ctx, cancel := timeout()
	dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
	cancel()
	must(err, "DescribeCluster")
	must(kerr.ErrorForCode(dc.ErrorCode), "DescribeCluster")
	checkEq(1, len(dc.Brokers), "brokers in DescribeCluster")
	node := dc.Brokers[0]
	checkEq(int32(port), node.Port, "port of the advertised broker")
	checkEq(node.NodeID, dc.ControllerID, "controller id in DescribeCluster")
	check(dc.ClusterID != "", "empty cluster id")
	ctx, cancel = timeout()
	md, err := adm.BrokerMetadata(ctx)
	cancel()
	must(err, "Metadata")
	checkEq(dc.ClusterID, md.Cluster, "cluster id in Metadata")
	checkEq(node.NodeID, md.Controller, "controller id in Metadata")
	checkEq(1, len(md.Brokers), "brokers in Metadata")

	topic := uniqueTopic("admin")
	cr := createTopic(adm, topic, 3, topicConfigs)
	checkEq(int32(3), cr.NumPartitions, "partitions in CreateTopics response")
	checkEq(int16(1), cr.ReplicationFactor, "replication factor in CreateTopics response")
	check(cr.ID != (kadm.TopicID{}), "CreateTopics returned no topic id")
	checkEq("3600000", cfgValue(cr.Configs, "retention.ms"), "retention.ms in CreateTopics response")

	ctx, cancel = timeout()
	td, err := adm.ListTopics(ctx, topic)
	cancel()
	must(err, "Metadata "+topic)
	d := td[topic]
	must(d.Err, "Metadata "+topic)
	checkEq(cr.ID, d.ID, "topic id in Metadata")
	checkEq(3, len(d.Partitions), "partitions in Metadata")
	for _, p := range d.Partitions {
		checkEq(node.NodeID, p.Leader, fmt.Sprintf("leader of partition %d", p.Partition))
		check(p.LeaderEpoch >= 0, "partition %d: leader epoch %d", p.Partition, p.LeaderEpoch)
		check(len(p.Replicas) == 1 && p.Replicas[0] == node.NodeID, "replicas of %d: %v", p.Partition, p.Replicas)
		check(len(p.ISR) == 1 && p.ISR[0] == node.NodeID, "isr of %d: %v", p.Partition, p.ISR)
	}
	// Metadata by topic id.
	req := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.TopicID = cr.ID
	req.Topics = append(req.Topics, mt)
	ctx, cancel = timeout()
	mresp, err := req.RequestWith(ctx, cl)
	cancel()
	must(err, "Metadata by topic id")
	checkEq(1, len(mresp.Topics), "topics in Metadata by id")
	must(kerr.ErrorForCode(mresp.Topics[0].ErrorCode), "Metadata by topic id")
	check(mresp.Topics[0].Topic != nil && *mresp.Topics[0].Topic == topic, "Metadata by id named %v", mresp.Topics[0].Topic)

	// CreateTopics with the broker's defaults (-1 partitions, -1 replication factor).
	defTopic := uniqueTopic("admin-defaults")
	ctx, cancel = timeout()
	dr, err := adm.CreateTopic(ctx, -1, -1, nil, defTopic)
	cancel()
	must(err, "CreateTopics with defaults")
	must(dr.Err, "CreateTopics with defaults")
	check(dr.NumPartitions >= 1, "default partition count %d", dr.NumPartitions)
	checkEq(int16(1), dr.ReplicationFactor, "default replication factor")
	waitForTopic(adm, defTopic, int(dr.NumPartitions))

	cfg := describeConfigs(adm, topic)
	for k, v := range topicConfigs {
		checkDynamic(cfg, k, *v)
	}
	for _, k := range []string{"compression.type", "min.insync.replicas", "message.timestamp.type"} {
		checkNotDynamic(cfg, k)
	}
	defCfg := describeConfigs(adm, defTopic)
	checkNotDynamic(defCfg, "retention.ms")
	checkEq("delete", cfgValue(defCfg, "cleanup.policy"), "default cleanup.policy")

	must(alter(adm, topic, false,
		kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: strp("7200000")},
		kadm.AlterConfig{Op: kadm.SetConfig, Name: "segment.bytes", Value: strp("8388608")},
		kadm.AlterConfig{Op: kadm.SetConfig, Name: "max.message.bytes", Value: strp("500000")},
		kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.bytes"}), "IncrementalAlterConfigs")
	waitUntil("altered configs", 15*time.Second, func() bool {
		return cfgValue(describeConfigs(adm, topic), "retention.ms") == "7200000"
	})
	cfg = describeConfigs(adm, topic)
	checkDynamic(cfg, "retention.ms", "7200000")
	checkDynamic(cfg, "segment.bytes", "8388608")
	checkDynamic(cfg, "max.message.bytes", "500000")
	checkDynamic(cfg, "cleanup.policy", "delete")
	checkNotDynamic(cfg, "retention.bytes")

	must(alter(adm, topic, true, kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: strp("1000")}),
		"IncrementalAlterConfigs validate-only")
	checkDynamic(describeConfigs(adm, topic), "retention.ms", "7200000")
	checkErr(kerr.InvalidConfig, alter(adm, topic, false,
		kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: strp("not-a-number")}),
		"IncrementalAlterConfigs retention.ms=not-a-number")
	checkDynamic(describeConfigs(adm, topic), "retention.ms", "7200000")

	ctx, cancel = timeout()
	cp, err := adm.UpdatePartitions(ctx, 5, topic)
	cancel()
	must(err, "CreatePartitions")
	must(cp.Error(), "CreatePartitions 3->5")
	waitForTopic(adm, topic, 5)
	pcl := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	s := produceSync(pcl, []*kgo.Record{{Topic: topic, Partition: 4, Key: []byte("k"), Value: []byte("to-new-partition")}}, "new partition")
	pcl.Close()
	checkEq(int64(0), s[0].rec.Offset, "offset of the first record in a new partition")

	ctx, cancel = timeout()
	dt, err := adm.DeleteTopics(ctx, topic, defTopic)
	cancel()
	must(err, "DeleteTopics")
	must(dt.Error(), "DeleteTopics")
	waitUntil("deleted topics to vanish", opTimeout, func() bool {
		ctx, cancel := timeout()
		defer cancel()
		td, err := adm.ListTopics(ctx)
		return err == nil && !td.Has(topic) && !td.Has(defTopic)
	})
	// A raw Metadata request: kadm may answer from the client's metadata cache.
	mreq := kmsg.NewPtrMetadataRequest()
	mt = kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	ctx, cancel = timeout()
	mresp, err = mreq.RequestWith(ctx, cl)
	cancel()
	must(err, "Metadata of a deleted topic")
	checkEq(1, len(mresp.Topics), "topics in Metadata of a deleted topic")
	checkErr(kerr.UnknownTopicOrPartition, kerr.ErrorForCode(mresp.Topics[0].ErrorCode), "Metadata of a deleted topic")
}

// listOffsets: ListOffsets earliest / latest / max timestamp / by timestamp through kadm on an
// uncompressed and a zstd partition (the max-timestamp record sits inside a batch) and on an
// empty partition.
func listOffsets(c *Ctx) {
	rnd := c.Rnd("list-offsets")
	cl := c.Client()
	defer cl.Close()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(opTimeout / time.Millisecond))
	topic := uniqueTopic("list-offsets")
	createTopic(adm, topic, 3, nil)
	base := time.Now().Add(-10 * time.Minute).UnixMilli()
	for p, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.ZstdCompression()} {
		var recs []*kgo.Record
		for i := 0; i < 100; i++ {
			ts := base + int64(i)*10
			if i == 60 {
				ts = base + 5000
			}
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Key: randBytes(rnd, 4),
				Value: text(rnd, 40), Timestamp: time.UnixMilli(ts)})
		}
		pcl := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(codec),
			kgo.ProducerLinger(50*time.Millisecond))
		produceSync(pcl, recs, "list-offsets data")
		pcl.Close()
	}
	type lo struct{ off, ts int64 }
	get := func(what string, fn func() (kadm.ListedOffsets, error)) map[int32]lo {
		offs, err := fn()
		must(err, "ListOffsets "+what)
		out := map[int32]lo{}
		offs.Each(func(o kadm.ListedOffset) {
			must(o.Err, fmt.Sprintf("ListOffsets %s partition %d", what, o.Partition))
			out[o.Partition] = lo{o.Offset, o.Timestamp}
		})
		return out
	}
	ctx, cancel := timeout()
	defer cancel()
	start := get("earliest", func() (kadm.ListedOffsets, error) { return adm.ListStartOffsets(ctx, topic) })
	end := get("latest", func() (kadm.ListedOffsets, error) { return adm.ListEndOffsets(ctx, topic) })
	maxTs := get("max timestamp", func() (kadm.ListedOffsets, error) { return adm.ListMaxTimestampOffsets(ctx, topic) })
	at := func(ms int64) map[int32]lo {
		return get(fmt.Sprint("after ", ms), func() (kadm.ListedOffsets, error) { return adm.ListOffsetsAfterMilli(ctx, ms, topic) })
	}
	for p := int32(0); p < 2; p++ {
		w := fmt.Sprintf("partition %d", p)
		checkEq(int64(0), start[p].off, "earliest "+w)
		checkEq(int64(100), end[p].off, "latest "+w)
		checkEq(lo{60, base + 5000}, maxTs[p], "max timestamp "+w)
		checkEq(lo{21, base + 210}, at(base + 205)[p], "by timestamp between records "+w)
		checkEq(lo{0, base}, at(base)[p], "by timestamp of the first record "+w)
		checkEq(lo{59, base + 590}, at(base + 590)[p], "by timestamp of offset 59 "+w)
		checkEq(lo{60, base + 5000}, at(base + 600)[p], "by timestamp of the skipped slot "+w)
		checkEq(lo{60, base + 5000}, at(base + 5000)[p], "by the max timestamp "+w)
	}
	// kadm maps "no record at or after the timestamp" to the end offset; check the raw answer too.
	checkEq(int64(100), at(base + 5001)[0].off, "kadm: by timestamp after all records")
	checkEq(int64(0), start[2].off, "earliest of an empty partition")
	checkEq(int64(0), end[2].off, "latest of an empty partition")

	raw := func(p int32, ts int64) (int64, int64, int32) {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p
		rp.Timestamp = ts
		rp.CurrentLeaderEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		ctx, cancel := timeout()
		defer cancel()
		resp, err := req.RequestWith(ctx, cl)
		must(err, "ListOffsets")
		part := resp.Topics[0].Partitions[0]
		must(kerr.ErrorForCode(part.ErrorCode), fmt.Sprintf("ListOffsets p%d ts %d", p, ts))
		return part.Offset, part.Timestamp, part.LeaderEpoch
	}
	off, ts, _ := raw(0, base+5001)
	checkEq(int64(-1), off, "raw ListOffsets after all records: offset")
	checkEq(int64(-1), ts, "raw ListOffsets after all records: timestamp")
	off, _, _ = raw(2, -3)
	checkEq(int64(-1), off, "raw ListOffsets max timestamp of an empty partition")
	off, _, _ = raw(2, base)
	checkEq(int64(-1), off, "raw ListOffsets by timestamp in an empty partition")
	off, ts, le := raw(1, -1)
	check(off == 100 && ts == -1 && le >= 0, "raw ListOffsets latest: offset %d timestamp %d epoch %d", off, ts, le)
}

// deleteRecords: the log start moves, ListOffsets earliest follows, reading from the start begins
// there; deleting below the start is a no-op; -1 means the high watermark; appends continue.
func deleteRecords(c *Ctx) {
	rnd := c.Rnd("delete-records")
	adm, done := c.Admin()
	defer done()
	topic := uniqueTopic("delete-records")
	createTopic(adm, topic, 1, nil)
	var recs []*kgo.Record
	for i := 0; i < 100; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: randBytes(rnd, 4), Value: randBytes(rnd, 100),
			Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(strconv.Itoa(i))}}})
	}
	pcl := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1024), kgo.ProducerLinger(0))
	s := produceSync(pcl, recs, "delete-records data")
	pcl.Close()

	del := func(at int64) (int64, error) {
		ctx, cancel := timeout()
		defer cancel()
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: topic, Partition: 0, At: at, LeaderEpoch: -1})
		rs, err := adm.DeleteRecords(ctx, os)
		must(err, "DeleteRecords")
		r, ok := rs.Lookup(topic, 0)
		check(ok, "DeleteRecords: no answer for partition 0")
		return r.LowWatermark, r.Err
	}
	low, err := del(40)
	must(err, "DeleteRecords before 40")
	checkEq(int64(40), low, "low watermark after DeleteRecords(40)")
	ctx, cancel := timeout()
	so, err := adm.ListStartOffsets(ctx, topic)
	cancel()
	must(err, "ListStartOffsets")
	o, _ := so.Lookup(topic, 0)
	checkEq(int64(40), o.Offset, "earliest after DeleteRecords")
	verify("after DeleteRecords(40)", s[40:], consume(c, topic, 1, nil, 60), 40, batchInfo{-1, -2})
	low, err = del(10)
	must(err, "DeleteRecords below the start")
	checkEq(int64(40), low, "low watermark after deleting below it")
	low, err = del(-1)
	must(err, "DeleteRecords to the high watermark")
	checkEq(int64(100), low, "low watermark after DeleteRecords(-1)")
	checkErr(kerr.OffsetOutOfRange, func() error { _, e := del(500); return e }(), "DeleteRecords beyond the high watermark")

	pcl = c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	more := produceSync(pcl, []*kgo.Record{{Topic: topic, Key: []byte("k"), Value: []byte("after")}}, "after delete")
	pcl.Close()
	checkEq(int64(100), more[0].rec.Offset, "offset of the first record after deleting everything")
	verify("after deleting everything", more, consume(c, topic, 1, nil, 1), 100, batchInfo{-1, -2})
}
