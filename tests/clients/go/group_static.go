package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// lastProcessed returns the highest offset a member processed per partition.
func lastProcessed(m *member) map[int32]int64 {
	out := map[int32]int64{}
	for _, e := range m.snapshot() {
		f := strings.Fields(e)
		if f[0] == "R" {
			p, _ := strconv.Atoi(f[1])
			o, _ := strconv.ParseInt(f[2], 10, 64)
			if o > out[int32(p)] || out[int32(p)] == 0 {
				out[int32(p)] = o
			}
		}
	}
	return out
}

// assignedCommitted returns the committed offsets a member saw at its assignments (last one per
// partition).
func assignedCommitted(m *member) map[int32]int64 {
	out := map[int32]int64{}
	for _, e := range m.snapshot() {
		f := strings.Fields(e)
		if f[0] == "A" {
			p, _ := strconv.Atoi(f[1])
			o, _ := strconv.ParseInt(f[2], 10, 64)
			out[int32(p)] = o
		}
	}
	return out
}

func ownedList(m *member) []int32 {
	var out []int32
	for p := range m.owned() {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// groupStatic: three static members (group.instance.id); one, a child process, stops without
// leaving (franz-go sends no LeaveGroup for a static member) and a new process with the same
// instance id rejoins within the session timeout. The other members see no rebalance (no
// assignment callbacks, same generation), the group keeps the instance as a member meanwhile,
// and the new process gets the same partitions and resumes from the committed offsets.
func groupStatic(c *Ctx) {
	const partitions = 6
	adm, closeAdm := c.Admin()
	defer closeAdm()
	topic := uniqueTopic("group-static")
	group := uniqueGroup("group-static")
	createTopic(adm, topic, partitions, nil)
	pcl := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceN(pcl, topic, partitions, c.Records/2, 0)
	pcl.Close()
	stopProducing := backgroundProducer(c, topic, partitions)
	producing := true
	defer func() {
		if producing {
			stopProducing()
		}
	}()

	// A long session: the restarted process must be back well within it.
	spec := memberSpec{Topic: topic, Group: group, Balancer: "cooperative-sticky", SessionMs: 20000}
	s1, s2, s3 := spec, spec, spec
	s1.Instance, s2.Instance, s3.Instance = "static-1", "static-2", "static-3"
	m1 := startMember(c, "static-1", s1)
	m2 := startMember(c, "static-2", s2)
	waitSettled(adm, group, topic, partitions, []*member{m1, m2}, settleLimit)
	old := spawnMember(c, "static-3-first", s3)
	all := []*member{m1, m2, old}
	defer func() {
		for _, m := range all {
			if m.cmd != nil && m.cmd.ProcessState == nil {
				_ = m.cmd.Process.Kill()
			}
		}
	}()
	waitSettled(adm, group, topic, partitions, []*member{m1, m2, old}, settleLimit)
	waitUntil("the static child to process records", 30*time.Second, func() bool { return old.count("R") > 0 })
	// Let the group run a moment in its final shape so every member has reported its generation.
	time.Sleep(1500 * time.Millisecond)
	oldParts := ownedList(old)
	check(len(oldParts) > 0, "the static child owns no partitions")
	before := map[string][3]int{}
	_, gen := m1.memberID()
	for _, m := range []*member{m1, m2} {
		_, g := m.memberID()
		checkEq(gen, g, m.name+" generation")
		before[m.name] = [3]int{m.count("A"), m.count("V"), int(g)}
	}

	// Stop without leaving: commit, close; the group must still list the instance.
	old.close()
	oldLast := lastProcessed(old)
	oldID, _ := old.memberID()
	ctx, cancel := timeout()
	view, err := describeAssignment(ctx, adm, group, topic)
	cancel()
	must(err, "describing the group after the static member stopped")
	_, still := view.members[oldID]
	check(still, "the static member %s stopped without LeaveGroup but the group no longer lists it (state %s)", oldID, view.state)
	checkEq("Stable", view.state, "group state while the static member is away")

	time.Sleep(time.Second)
	again := spawnMember(c, "static-3-again", s3)
	all = append(all, again)
	settled := waitSettled(adm, group, topic, partitions, []*member{m1, m2, again}, settleLimit)
	checkEq(fmt.Sprint(oldParts), fmt.Sprint(settled["static-3-again"]), "partitions of the rejoined static member")
	_, newGen := again.memberID()
	checkEq(gen, newGen, "generation of the rejoined static member")
	// The rejoined member resumed exactly where the first process committed.
	committed := assignedCommitted(again)
	for _, p := range oldParts {
		want := assignedCommitted(old)[p]
		if last, ok := oldLast[p]; ok {
			want = last + 1
		}
		checkEq(want, committed[p], fmt.Sprintf("committed offset of partition %d seen by the rejoined member", p))
	}
	waitUntil("the rejoined member to process records", 30*time.Second, func() bool { return again.count("R") > 0 })
	time.Sleep(1500 * time.Millisecond)
	for _, m := range []*member{m1, m2} {
		_, g := m.memberID()
		now := [3]int{m.count("A"), m.count("V"), int(g)}
		checkEq(before[m.name], now, m.name+" (assigned callbacks, revoked callbacks, generation) across the static restart")
	}

	producing = false
	stopProducing()
	ends := waitCommittedAtEnd(adm, group, topic, 90*time.Second)
	m1.close()
	m2.close()
	again.close()
	checkGroupConsumption(all, ends)
}
