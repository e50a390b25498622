package main

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// groupKIP848: the next-generation consumer group protocol (ConsumerGroupHeartbeat, server-side
// assignor). franz-go uses it with kgo.ServerSideBalancer(): its cooperative-sticky balancer asks
// for the broker's "uniform" assignor, its range balancer for "range". Three members, a fourth
// joins, one leaves; then a second group with the range assignor.
func groupKIP848(c *Ctx) {
	const partitions = 12
	adm, closeAdm := c.Admin()
	defer closeAdm()
	topic := uniqueTopic("group-kip848")
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

	group := uniqueGroup("group-kip848")
	spec := memberSpec{Topic: topic, Group: group, Balancer: "cooperative-sticky", NextGen: true}
	m1 := startMember(c, "m1", spec)
	m2 := startMember(c, "m2", spec)
	m3 := startMember(c, "m3", spec)
	all := []*member{m1, m2, m3}
	waitSettled(adm, group, topic, partitions, []*member{m1, m2, m3}, settleLimit)
	checkConsumerGroup(c, group, "uniform", 3)
	m4 := startMember(c, "m4", spec)
	all = append(all, m4)
	waitSettled(adm, group, topic, partitions, []*member{m1, m2, m3, m4}, settleLimit)
	waitUntil("m4 to process records", 30*time.Second, func() bool { return m4.count("R") > 0 })
	closeAndCheckGone(adm, group, topic, m1, "epoch -1")
	waitSettled(adm, group, topic, partitions, []*member{m2, m3, m4}, settleLimit)
	checkConsumerGroup(c, group, "uniform", 3)

	// The range assignor: two members get six contiguous partitions each.
	rangeGroup := uniqueGroup("group-kip848-range")
	rspec := memberSpec{Topic: topic, Group: rangeGroup, Balancer: "range", NextGen: true}
	r1 := startMember(c, "r1", rspec)
	r2 := startMember(c, "r2", rspec)
	settled := waitSettled(adm, rangeGroup, topic, partitions, []*member{r1, r2}, settleLimit)
	checkConsumerGroup(c, rangeGroup, "range", 2)
	for name, parts := range settled {
		checkEq(6, len(parts), "partitions of "+name+" with the range assignor")
		checkEq(parts[0]+5, parts[5], fmt.Sprintf("contiguous range for %s: %v", name, parts))
	}

	producing = false
	stopProducing()
	ends := waitCommittedAtEnd(adm, group, topic, 90*time.Second)
	rEnds := waitCommittedAtEnd(adm, rangeGroup, topic, 90*time.Second)
	for _, m := range []*member{m2, m3, m4, r1, r2} {
		m.close()
	}
	checkGroupConsumption(all, ends)
	rSeen := map[int32]map[int64]bool{}
	checkMemberEvents(r1, rSeen)
	checkMemberEvents(r2, rSeen)
	checkCoverage(rSeen, rEnds)
}

// checkConsumerGroup asserts that ListGroups reports the group with type "consumer" and that
// ConsumerGroupDescribe names the assignor and the expected number of members, each with an
// assignment.
func checkConsumerGroup(c *Ctx, group, assignor string, members int) {
	adm, closeAdm := c.Admin()
	defer closeAdm()
	ctx, cancel := timeout()
	defer cancel()
	listed, err := adm.ListGroupsByType(ctx, []string{"consumer"})
	must(err, "ListGroups type=consumer")
	l, ok := listed[group]
	check(ok, "ListGroups with type filter consumer does not list %s", group)
	checkEq("consumer", l.GroupType, "group type in ListGroups")
	classic, err := adm.ListGroupsByType(ctx, []string{"classic"})
	must(err, "ListGroups type=classic")
	_, ok = classic[group]
	check(!ok, "ListGroups with type filter classic lists the consumer group %s", group)
	d, err := adm.DescribeConsumerGroups(ctx, group)
	must(err, "ConsumerGroupDescribe")
	g := d[group]
	must(g.Err, "ConsumerGroupDescribe "+group)
	checkEq(assignor, g.AssignorName, "assignor of "+group)
	checkEq(members, len(g.Members), "members of "+group)
	check(g.Epoch > 0, "group epoch %d", g.Epoch)
	for _, m := range g.Members {
		check(len(m.Assignment) > 0, "member %s has no assignment", m.MemberID)
		check(m.MemberEpoch > 0, "member %s epoch %d", m.MemberID, m.MemberEpoch)
	}
}
