package main

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The two halves of a test that restarts (or kill -9s) the broker in between. Both take -topic
// and -group; neither runs with "-scenario all".
//
//	group-resume-commit: creates the topic (6 partitions) and fills it with -records records
//	                     when it is missing or empty, consumes it in the group and commits
//	                     exactly half of every partition (end/2), checks the commit with
//	                     OffsetFetch, then leaves.
//	group-resume-check:  OffsetFetch still returns end/2 for every partition; a fresh member of
//	                     the group starts exactly there, reads the rest and commits the end.

const resumePartitions = 6

func resumeArgs(c *Ctx) (string, string) {
	check(c.Topic != "" && c.Group != "", "group-resume-commit and group-resume-check need -topic and -group")
	return c.Topic, c.Group
}

func groupResumeCommit(c *Ctx) {
	topic, group := resumeArgs(c)
	adm, closeAdm := c.Admin()
	defer closeAdm()
	ctx, cancel := timeout()
	td, err := adm.ListTopics(ctx, topic)
	cancel()
	must(err, "Metadata "+topic)
	if td[topic].Err != nil {
		createTopic(adm, topic, resumePartitions, nil)
	}
	ends := endOffsets(adm, topic)
	total := int64(0)
	for _, e := range ends {
		total += e
	}
	if total == 0 {
		pcl := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
		produceN(pcl, topic, len(ends), c.Records, 0)
		pcl.Close()
		ends = endOffsets(adm, topic)
	}
	half := map[int32]int64{}
	for p, e := range ends {
		half[p] = e / 2
	}

	cl := resumeMember(c, group, topic)
	defer cl.Close()
	next := map[int32]int64{}
	pollUntilReached(cl, next, half, "half of every partition", func(r *kgo.Record) {
		if r.Offset >= half[r.Partition] {
			return
		}
		want := next[r.Partition]
		check(r.Offset == want, "partition %d: record %d after %d", r.Partition, r.Offset, want-1)
		next[r.Partition] = r.Offset + 1
	})
	commit := map[string]map[int32]kgo.EpochOffset{topic: {}}
	for p, h := range half {
		commit[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: h}
	}
	ctx, cancel = timeout()
	defer cancel()
	var commitErr error
	cl.CommitOffsetsSync(ctx, commit, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		if err == nil {
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode != 0 {
						commitErr = fmt.Errorf("partition %d: %s", p.Partition, code(p.ErrorCode))
					}
				}
			}
		}
	})
	must(commitErr, "committing half of every partition")
	checkCommitted(adm, group, topic, half, "after the commit")
	fmt.Printf("committed %v of %v in group %s\n", half, ends, group)
}

// resumeMember is a member of the resume scenarios' group: manual commits, from the start
// of every partition without one.
func resumeMember(c *Ctx, group, topic string) *kgo.Client {
	return c.Client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.SessionTimeout(groupSessionMs*time.Millisecond),
		kgo.HeartbeatInterval(time.Second))
}

// pollUntilReached polls until next has reached target on every partition (within 90 s),
// handing every record to onRecord; `what` names the goal in the failure.
func pollUntilReached(cl *kgo.Client, next, target map[int32]int64, what string, onRecord func(*kgo.Record)) {
	deadline := time.Now().Add(90 * time.Second)
	for !reachedHalf(next, target) {
		check(time.Now().Before(deadline), "did not read %s within 90s: at %v, want %v", what, next, target)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachError(func(t string, p int32, err error) {
			if err != context.DeadlineExceeded {
				failf("fetch %s/%d: %v", t, p, err)
			}
		})
		fs.EachRecord(onRecord)
	}
}

func reachedHalf(next, half map[int32]int64) bool {
	for p, h := range half {
		if next[p] < h {
			return false
		}
	}
	return true
}

func checkCommitted(adm *kadm.Client, group, topic string, want map[int32]int64, when string) {
	ctx, cancel := timeout()
	defer cancel()
	offs, err := adm.FetchOffsetsForTopics(ctx, group, topic)
	must(err, "OffsetFetch "+when)
	for p, w := range want {
		o, ok := offs.Lookup(topic, p)
		check(ok && o.Err == nil, "OffsetFetch %s: partition %d missing (%v)", when, p, o.Err)
		checkEq(w, o.At, fmt.Sprintf("committed offset of partition %d %s", p, when))
	}
}

func groupResumeCheck(c *Ctx) {
	topic, group := resumeArgs(c)
	adm, closeAdm := c.Admin()
	defer closeAdm()
	waitForTopic(adm, topic, resumePartitions)
	ends := endOffsets(adm, topic)
	half := map[int32]int64{}
	for p, e := range ends {
		half[p] = e / 2
	}
	checkCommitted(adm, group, topic, half, "before rejoining")

	first := map[int32]int64{}
	next := map[int32]int64{}
	cl := resumeMember(c, group, topic)
	defer cl.Close()
	pollUntilReached(cl, next, ends, "to the end", func(r *kgo.Record) {
		if _, ok := first[r.Partition]; !ok {
			first[r.Partition] = r.Offset
			checkEq(half[r.Partition], r.Offset, fmt.Sprintf("first offset read from partition %d (the committed one)", r.Partition))
			next[r.Partition] = r.Offset
		}
		checkEq(next[r.Partition], r.Offset, fmt.Sprintf("next offset of partition %d", r.Partition))
		next[r.Partition] = r.Offset + 1
	})
	ctx, cancel := timeout()
	defer cancel()
	must(cl.CommitUncommittedOffsets(ctx), "committing the end")
	checkCommitted(adm, group, topic, ends, "after reading the rest")
}
