package main

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// groupAdmin: the admin side of groups through kadm. An active classic group (one member of
// franz-go) and an offsets-only group (committed by the admin client, no members): ListGroups
// with state and type filters, DescribeGroups, OffsetFetch, admin OffsetCommit (refused for a
// group with members), OffsetDelete (GROUP_SUBSCRIBED_TO_TOPIC while subscribed), DeleteGroups
// (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND), and offsets of a deleted topic leaving OffsetFetch.
func groupAdmin(c *Ctx) {
	adm, closeAdm := c.Admin()
	defer closeAdm()
	topic := uniqueTopic("group-admin")
	other := uniqueTopic("group-admin-other")
	doomed := uniqueTopic("group-admin-deleted")
	createTopic(adm, topic, 3, nil)
	createTopic(adm, other, 1, nil)
	createTopic(adm, doomed, 2, nil)
	pcl := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceN(pcl, topic, 3, 300, 0)
	produceN(pcl, other, 1, 50, 0)
	produceN(pcl, doomed, 2, 20, 0)
	pcl.Close()

	active := uniqueGroup("group-admin-active")
	idle := uniqueGroup("group-admin-idle")
	m := startMember(c, "active", memberSpec{Topic: topic, Group: active, Balancer: "cooperative-sticky", SessionMs: groupSessionMs})
	memberOpen := true
	defer func() {
		if memberOpen {
			m.close()
		}
	}()
	waitSettled(adm, active, topic, 3, []*member{m}, settleLimit)
	waitCommittedAtEnd(adm, active, topic, 60*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 3*opTimeout)
	defer cancel()
	// Offsets committed by an admin client create an Empty group.
	idleOffsets := kadm.Offsets{}
	idleOffsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: 10, LeaderEpoch: -1, Metadata: "m-0"})
	idleOffsets.Add(kadm.Offset{Topic: topic, Partition: 2, At: 30, LeaderEpoch: -1, Metadata: ""})
	idleOffsets.Add(kadm.Offset{Topic: other, Partition: 0, At: 5, LeaderEpoch: -1, Metadata: "other"})
	idleOffsets.Add(kadm.Offset{Topic: doomed, Partition: 1, At: 7, LeaderEpoch: -1})
	must(adm.CommitAllOffsets(ctx, idle, idleOffsets), "admin OffsetCommit to a new group")

	// ListGroups with filters.
	all, err := adm.ListGroups(ctx)
	must(err, "ListGroups")
	for g, protocolType := range map[string]string{active: "consumer", idle: ""} {
		l, ok := all[g]
		check(ok, "ListGroups does not list %s", g)
		checkEq(protocolType, l.ProtocolType, "protocol type of "+g)
		checkEq("classic", l.GroupType, "group type of "+g)
	}
	checkEq("Stable", all[active].State, "listed state of the active group")
	checkEq("Empty", all[idle].State, "listed state of the offsets-only group")
	stable, err := adm.ListGroups(ctx, "Stable")
	must(err, "ListGroups state=Stable")
	check(hasGroup(stable, active) && !hasGroup(stable, idle), "ListGroups state=Stable: %v", stable.Groups())
	empty, err := adm.ListGroups(ctx, "Empty")
	must(err, "ListGroups state=Empty")
	check(hasGroup(empty, idle) && !hasGroup(empty, active), "ListGroups state=Empty: %v", empty.Groups())
	classic, err := adm.ListGroupsByType(ctx, []string{"classic"})
	must(err, "ListGroups type=classic")
	check(hasGroup(classic, idle) && hasGroup(classic, active), "ListGroups type=classic: %v", classic.Groups())
	consumer, err := adm.ListGroupsByType(ctx, []string{"consumer"})
	must(err, "ListGroups type=consumer")
	check(!hasGroup(consumer, idle) && !hasGroup(consumer, active), "ListGroups type=consumer lists classic groups: %v", consumer.Groups())

	// DescribeGroups.
	dg, err := adm.DescribeGroups(ctx, active, idle)
	must(err, "DescribeGroups")
	da := dg[active]
	must(da.Err, "DescribeGroups "+active)
	checkEq("Stable", da.State, "described state of the active group")
	checkEq("consumer", da.ProtocolType, "described protocol type")
	checkEq("cooperative-sticky", da.Protocol, "described protocol (assignor)")
	checkEq(1, len(da.Members), "described members")
	memberID, _ := m.memberID()
	checkEq(memberID, da.Members[0].MemberID, "described member id")
	checkEq("kaas-go", da.Members[0].ClientID, "described client id")
	asg, ok := da.Members[0].Assigned.AsConsumer()
	check(ok && len(asg.Topics) == 1 && asg.Topics[0].Topic == topic && len(asg.Topics[0].Partitions) == 3,
		"described assignment: %+v", asg)
	meta, ok := da.Members[0].Join.AsConsumer()
	check(ok && len(meta.Topics) == 1 && meta.Topics[0] == topic, "described subscription: %+v", meta)
	di := dg[idle]
	must(di.Err, "DescribeGroups "+idle)
	checkEq("Empty", di.State, "described state of the offsets-only group")
	checkEq(0, len(di.Members), "members of the offsets-only group")

	// OffsetFetch: all offsets of a group, with metadata.
	fo, err := adm.FetchOffsets(ctx, idle)
	must(err, "OffsetFetch")
	must(fo.Error(), "OffsetFetch partitions")
	for _, want := range []kadm.Offset{
		{Topic: topic, Partition: 0, At: 10, Metadata: "m-0"},
		{Topic: topic, Partition: 2, At: 30},
		{Topic: other, Partition: 0, At: 5, Metadata: "other"},
		{Topic: doomed, Partition: 1, At: 7},
	} {
		o, ok := fo.Lookup(want.Topic, want.Partition)
		check(ok, "OffsetFetch lacks %s/%d", want.Topic, want.Partition)
		checkEq(want.At, o.At, fmt.Sprintf("committed offset %s/%d", want.Topic, want.Partition))
		checkEq(want.Metadata, o.Metadata, fmt.Sprintf("committed metadata %s/%d", want.Topic, want.Partition))
	}
	_, ok = fo.Lookup(topic, 1)
	check(!ok, "OffsetFetch of all topics lists a partition that has no commit")
	ends := endOffsets(adm, topic)
	fa, err := adm.FetchOffsetsForTopics(ctx, active, topic)
	must(err, "OffsetFetch of the active group")
	for p, end := range ends {
		o, _ := fa.Lookup(topic, p)
		checkEq(end, o.At, fmt.Sprintf("active group's committed offset of partition %d", p))
	}

	// Altering offsets: fine for an Empty group, refused while the group has members.
	alter := kadm.Offsets{}
	alter.Add(kadm.Offset{Topic: topic, Partition: 1, At: 20, LeaderEpoch: -1})
	must(adm.CommitAllOffsets(ctx, idle, alter), "altering the offsets of an Empty group")
	fo, err = adm.FetchOffsetsForTopics(ctx, idle, topic)
	must(err, "OffsetFetch after altering")
	o, _ := fo.Lookup(topic, 1)
	checkEq(int64(20), o.At, "altered offset")
	resp, err := adm.CommitOffsets(ctx, active, alter)
	must(err, "admin OffsetCommit to the active group")
	checkErr(kerr.UnknownMemberID, resp.Error(), "admin OffsetCommit to a group with members")

	// OffsetDelete.
	dr, err := adm.DeleteOffsets(ctx, active, kadm.TopicsSet{topic: {0: {}, 1: {}, 2: {}}})
	must(err, "OffsetDelete on the active group")
	for p := int32(0); p < 3; p++ {
		e, _ := dr.Lookup(topic, p)
		checkErr(kerr.GroupSubscribedToTopic, e, fmt.Sprintf("OffsetDelete of %s/%d while the group consumes it", topic, p))
	}
	dr, err = adm.DeleteOffsets(ctx, idle, kadm.TopicsSet{other: {0: {}}})
	must(err, "OffsetDelete on the Empty group")
	must(dr.Error(), "OffsetDelete on the Empty group")
	fo, err = adm.FetchOffsets(ctx, idle)
	must(err, "OffsetFetch after OffsetDelete")
	_, ok = fo.Lookup(other, 0)
	check(!ok, "OffsetFetch still lists a deleted offset")
	_, ok = fo.Lookup(topic, 0)
	check(ok, "OffsetDelete removed more than asked")
	_, err = adm.DeleteOffsets(ctx, uniqueGroup("group-admin-missing"), kadm.TopicsSet{other: {0: {}}})
	checkErr(kerr.GroupIDNotFound, err, "OffsetDelete on an unknown group")

	// DeleteGroups.
	del, err := adm.DeleteGroups(ctx, active)
	must(err, "DeleteGroups of the active group")
	checkErr(kerr.NonEmptyGroup, del[active].Err, "DeleteGroups of a group with members")
	missing := uniqueGroup("group-admin-missing")
	del, err = adm.DeleteGroups(ctx, missing)
	must(err, "DeleteGroups of an unknown group")
	checkErr(kerr.GroupIDNotFound, del[missing].Err, "DeleteGroups of an unknown group")

	// Offsets of a deleted topic disappear from OffsetFetch.
	_, err = adm.DeleteTopics(ctx, doomed)
	must(err, "DeleteTopics")
	waitUntil("the offsets of a deleted topic to leave OffsetFetch", 30*time.Second, func() bool {
		fo, err := adm.FetchOffsets(ctx, idle)
		if err != nil {
			return false
		}
		_, still := fo.Lookup(doomed, 1)
		return !still
	})
	fo, err = adm.FetchOffsets(ctx, idle)
	must(err, "OffsetFetch after deleting a topic")
	_, ok = fo.Lookup(topic, 0)
	check(ok, "deleting a topic removed the offsets of another topic")

	// Once its member has left, the active group is Empty: its offsets and then the group can go.
	m.close()
	memberOpen = false
	waitUntil("the group to be Empty after its member left", 30*time.Second, func() bool {
		d, err := adm.DescribeGroups(ctx, active)
		return err == nil && d[active].State == "Empty"
	})
	dr, err = adm.DeleteOffsets(ctx, active, kadm.TopicsSet{topic: {0: {}}})
	must(err, "OffsetDelete after the member left")
	must(dr.Error(), "OffsetDelete after the member left")
	for _, g := range []string{active, idle} {
		del, err = adm.DeleteGroups(ctx, g)
		must(err, "DeleteGroups "+g)
		must(del[g].Err, "DeleteGroups "+g)
	}
	all, err = adm.ListGroups(ctx)
	must(err, "ListGroups after DeleteGroups")
	check(!hasGroup(all, active) && !hasGroup(all, idle), "deleted groups are still listed")
	fo, err = adm.FetchOffsets(ctx, idle)
	must(err, "OffsetFetch of a deleted group")
	n := 0
	fo.Each(func(kadm.OffsetResponse) { n++ })
	checkEq(0, n, "offsets of a deleted group")
}

func hasGroup(l kadm.ListedGroups, g string) bool {
	_, ok := l[g]
	return ok
}
