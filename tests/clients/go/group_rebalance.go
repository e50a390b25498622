package main

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Classic-protocol settings every group scenario uses (the broker must allow them: see
// group.min.session.timeout.ms in tests/clients/README.md).
const (
	groupSessionMs = 6000
	settleLimit    = 60 * time.Second
)

func uniqueGroup(name string) string {
	return uniqueTopic("grp-" + name)
}

// produceN produces n small records round-robin over the topic's partitions and waits for them.
func produceN(cl *kgo.Client, topic string, partitions, n, from int) {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: int32((from + i) % partitions),
			Value: []byte(fmt.Sprintf("record-%d", from+i))}
	}
	ctx, cancel := timeout()
	defer cancel()
	must(cl.ProduceSync(ctx, recs...).FirstErr(), "producing to "+topic)
}

// backgroundProducer produces a few records every 50 ms until stopped; stop waits for it.
func backgroundProducer(c *Ctx, topic string, partitions int) (stop func() int) {
	cl := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	var n atomic.Int64
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		i := 1 << 20
		for {
			select {
			case <-quit:
				return
			case <-time.After(50 * time.Millisecond):
			}
			produceN(cl, topic, partitions, 6, i)
			i += 6
			n.Add(6)
		}
	}()
	return func() int {
		close(quit)
		wg.Wait()
		cl.Close()
		return int(n.Load())
	}
}

// groupRebalance: three members of a classic group (franz-go's cooperative-sticky balancer), a
// fourth (a child process) joins, one leaves cleanly (LeaveGroup), then the child is SIGKILLed
// and the group must notice by session timeout. Records are produced up front and during the
// whole scenario; every member commits synchronously after processing.
func groupRebalance(c *Ctx) {
	rebalanceScenario(c, "group-rebalance", memberSpec{Balancer: "cooperative-sticky", SessionMs: groupSessionMs})
}

func rebalanceScenario(c *Ctx, name string, base memberSpec) {
	const partitions = 12
	adm, closeAdm := c.Admin()
	defer closeAdm()
	topic := uniqueTopic(name)
	group := uniqueGroup(name)
	createTopic(adm, topic, partitions, nil)
	pcl := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceN(pcl, topic, partitions, c.Records, 0)
	pcl.Close()
	stopProducing := backgroundProducer(c, topic, partitions)
	producing := true
	defer func() {
		if producing {
			stopProducing()
		}
	}()

	spec := base
	spec.Topic, spec.Group = topic, group
	var all []*member
	defer func() {
		for _, m := range all {
			if m.cmd != nil && m.cmd.ProcessState == nil {
				_ = m.cmd.Process.Kill()
			}
		}
	}()
	m1 := startMember(c, "m1", spec)
	m2 := startMember(c, "m2", spec)
	m3 := startMember(c, "m3", spec)
	all = append(all, m1, m2, m3)
	waitSettled(adm, group, topic, partitions, []*member{m1, m2, m3}, settleLimit)

	// A fourth member joins, as a separate process so that it can be killed for real.
	m4 := spawnMember(c, "m4-child", spec)
	all = append(all, m4)
	waitSettled(adm, group, topic, partitions, []*member{m1, m2, m3, m4}, settleLimit)
	waitUntil("the child member to process records", 30*time.Second, func() bool { return m4.count("R") > 0 })

	// m1 leaves cleanly: LeaveGroup removes it at once, without waiting for its session to end.
	closeAndCheckGone(adm, group, topic, m1, "LeaveGroup")
	waitSettled(adm, group, topic, partitions, []*member{m2, m3, m4}, settleLimit)

	// m4 dies without leaving: the group keeps it until its session times out.
	m4ID, _ := m4.memberID()
	m4.kill()
	ctx, cancel := timeout()
	view, err := describeAssignment(ctx, adm, group, topic)
	cancel()
	must(err, "describing the group after a member was killed")
	_, still := view.members[m4ID]
	check(still, "a SIGKILLed member (no LeaveGroup) vanished from the group before its session timed out")
	waitSettled(adm, group, topic, partitions, []*member{m2, m3}, settleLimit)

	producing = false
	extra := stopProducing()
	ends := waitCommittedAtEnd(adm, group, topic, 90*time.Second)
	total := int64(0)
	for _, e := range ends {
		total += e
	}
	checkEq(int64(c.Records+extra), total, "records in the topic")
	m2.close()
	m3.close()

	checkGroupConsumption(all, ends)
	// The final commits (at close) must not have moved anything.
	ctx, cancel = timeout()
	defer cancel()
	offs, err := adm.FetchOffsetsForTopics(ctx, group, topic)
	must(err, "OffsetFetch after close")
	for p, end := range ends {
		o, _ := offs.Lookup(topic, p)
		checkEq(end, o.At, fmt.Sprintf("final committed offset of partition %d", p))
	}
}
