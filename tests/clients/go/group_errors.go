package main

import (
	"crypto/rand"
	"encoding/base64"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// groupErrors sends hand-built group requests (kmsg) to the broker (the only broker, so the
// coordinator of every group) and checks the exact error codes of the classic and the KIP-848
// group protocols.
func groupErrors(c *Ctx) {
	adm, closeAdm := c.Admin()
	defer closeAdm()
	topic := uniqueTopic("group-errors")
	createTopic(adm, topic, 2, nil)
	// Separate clients are separate connections: Kafka answers one request per connection at a
	// time, and a JoinGroup can wait for a rebalance.
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(8, 9) // OffsetCommit v9 names topics (v10 uses topic ids)
	a := &rawConn{c: c, cl: c.Client(), v12: c.Client(kgo.MaxVersions(vs))}
	b := &rawConn{c: c, cl: c.Client()}
	defer a.cl.Close()
	defer a.v12.Close()
	defer b.cl.Close()
	group := uniqueGroup("group-errors")

	// FindCoordinator v4+ batches keys.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{group, group + "-b", group + "-c"}
	fcr := a.send(a.cl, fc).(*kmsg.FindCoordinatorResponse)
	check(fcr.Version >= 4, "FindCoordinator answered v%d", fcr.Version)
	checkEq(3, len(fcr.Coordinators), "coordinators in a batched FindCoordinator answer")
	keys := map[string]bool{}
	for _, co := range fcr.Coordinators {
		checkCode(nil, co.ErrorCode, "FindCoordinator "+co.Key)
		check(co.NodeID >= 0 && co.Port > 0 && co.Host != "", "coordinator for %s: node %d %s:%d", co.Key, co.NodeID, co.Host, co.Port)
		keys[co.Key] = true
	}
	for _, k := range fc.CoordinatorKeys {
		check(keys[k], "FindCoordinator did not answer key %s", k)
	}

	// JoinGroup v4+ with an empty member id: MEMBER_ID_REQUIRED, with the id to use.
	join := func(r *rawConn, g, memberID string, sessionMs int32) *kmsg.JoinGroupResponse {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group = g
		req.SessionTimeoutMillis = sessionMs
		req.RebalanceTimeoutMillis = 10000
		req.MemberID = memberID
		req.ProtocolType = "consumer"
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Topics = []string{topic}
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name = "range"
		p.Metadata = meta.AppendTo(nil)
		req.Protocols = append(req.Protocols, p)
		return r.send(r.cl, req).(*kmsg.JoinGroupResponse)
	}
	jr := join(a, group, "", 10000)
	check(jr.Version >= 4, "JoinGroup answered v%d", jr.Version)
	checkCode(kerr.MemberIDRequired, jr.ErrorCode, "JoinGroup with an empty member id")
	check(jr.MemberID != "", "MEMBER_ID_REQUIRED without a member id")
	memberA := jr.MemberID
	jr = join(a, group, memberA, 10000)
	checkCode(nil, jr.ErrorCode, "JoinGroup with the given member id")
	checkEq(memberA, jr.LeaderID, "leader of a one-member group")
	gen := jr.Generation
	check(gen >= 1, "generation %d", gen)
	checkEq("range", *jr.Protocol, "chosen protocol")

	sync := func(r *rawConn, memberID string, generation int32) *kmsg.SyncGroupResponse {
		req := kmsg.NewPtrSyncGroupRequest()
		req.Group = group
		req.MemberID = memberID
		req.Generation = generation
		req.ProtocolType = kmsg.StringPtr("consumer")
		req.Protocol = kmsg.StringPtr("range")
		if memberID == memberA {
			asg := kmsg.NewConsumerMemberAssignment()
			t := kmsg.NewConsumerMemberAssignmentTopic()
			t.Topic = topic
			t.Partitions = []int32{0, 1}
			asg.Topics = append(asg.Topics, t)
			sa := kmsg.NewSyncGroupRequestGroupAssignment()
			sa.MemberID = memberA
			sa.MemberAssignment = asg.AppendTo(nil)
			req.GroupAssignment = append(req.GroupAssignment, sa)
		}
		return r.send(r.cl, req).(*kmsg.SyncGroupResponse)
	}
	heartbeat := func(r *rawConn, memberID string, generation int32) int16 {
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group = group
		req.MemberID = memberID
		req.Generation = generation
		return r.send(r.cl, req).(*kmsg.HeartbeatResponse).ErrorCode
	}
	checkCode(kerr.UnknownMemberID, sync(a, "unknown-member", gen).ErrorCode, "SyncGroup of an unknown member")
	checkCode(kerr.IllegalGeneration, sync(a, memberA, gen+7).ErrorCode, "SyncGroup with a wrong generation")
	sr := sync(a, memberA, gen)
	checkCode(nil, sr.ErrorCode, "SyncGroup of the leader")
	var got kmsg.ConsumerMemberAssignment
	must(got.ReadFrom(sr.MemberAssignment), "decoding the assignment from SyncGroup")
	check(len(got.Topics) == 1 && got.Topics[0].Topic == topic && len(got.Topics[0].Partitions) == 2,
		"assignment from SyncGroup: %+v", got.Topics)
	checkCode(nil, heartbeat(a, memberA, gen), "Heartbeat of the member")
	checkCode(kerr.UnknownMemberID, heartbeat(a, "unknown-member", gen), "Heartbeat of an unknown member")
	checkCode(kerr.IllegalGeneration, heartbeat(a, memberA, gen+7), "Heartbeat with a wrong generation")

	// OffsetCommit checks.
	commit := func(r *rawConn, g, memberID string, generation int32, t string, metadata string) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group = g
		req.MemberID = memberID
		req.Generation = generation
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = t
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition = 0
		p.Offset = 0
		p.LeaderEpoch = -1
		p.Metadata = &metadata
		rt.Partitions = append(rt.Partitions, p)
		req.Topics = append(req.Topics, rt)
		resp := r.send(r.v12, req).(*kmsg.OffsetCommitResponse)
		check(len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1, "OffsetCommit answer shape: %+v", resp.Topics)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	checkCode(nil, commit(a, group, memberA, gen, topic, "ok"), "OffsetCommit of the member")
	checkCode(kerr.OffsetMetadataTooLarge, commit(a, group, memberA, gen, topic, strings.Repeat("m", 4097)),
		"OffsetCommit with 4097 bytes of metadata")
	checkCode(nil, commit(a, group, memberA, gen, topic, strings.Repeat("m", 4096)), "OffsetCommit with 4096 bytes of metadata")
	checkCode(kerr.UnknownTopicOrPartition, commit(a, group, memberA, gen, uniqueTopic("group-errors-missing"), ""),
		"OffsetCommit for a partition of an unknown topic")
	checkCode(kerr.IllegalGeneration, commit(a, group, memberA, gen+7, topic, ""), "OffsetCommit with a wrong generation")
	checkCode(kerr.UnknownMemberID, commit(a, group, "unknown-member", gen, topic, ""), "OffsetCommit of an unknown member")

	// A second member joins: the group rebalances; the first member's heartbeat says so.
	jb := join(b, group, "", 10000)
	checkCode(kerr.MemberIDRequired, jb.ErrorCode, "second JoinGroup with an empty member id")
	memberB := jb.MemberID
	joinedB := make(chan *kmsg.JoinGroupResponse, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				joinedB <- nil
			}
		}()
		joinedB <- join(b, group, memberB, 10000)
	}()
	var hb int16
	waitUntil("Heartbeat to report REBALANCE_IN_PROGRESS", 10*time.Second, func() bool {
		hb = heartbeat(a, memberA, gen)
		return hb != 0
	})
	checkCode(kerr.RebalanceInProgress, hb, "Heartbeat during a rebalance")
	jr = join(a, group, memberA, 10000)
	checkCode(nil, jr.ErrorCode, "rejoin during the rebalance")
	var jb2 *kmsg.JoinGroupResponse
	select {
	case jb2 = <-joinedB:
	case <-time.After(opTimeout):
		failf("the second member's JoinGroup did not complete")
	}
	check(jb2 != nil, "the second member's JoinGroup failed")
	checkCode(nil, jb2.ErrorCode, "second member's JoinGroup")
	checkEq(jr.Generation, jb2.Generation, "generation of both members")
	check(jr.Generation > gen, "generation did not advance: %d then %d", gen, jr.Generation)
	checkCode(kerr.IllegalGeneration, commit(a, group, memberA, gen, topic, ""), "OffsetCommit with the previous generation")

	// LeaveGroup v3+: per-member answers.
	lg := kmsg.NewPtrLeaveGroupRequest()
	lg.Group = group
	for _, id := range []string{memberA, memberB, "unknown-member"} {
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = id
		lg.Members = append(lg.Members, m)
	}
	lr := a.send(a.cl, lg).(*kmsg.LeaveGroupResponse)
	checkCode(nil, lr.ErrorCode, "LeaveGroup")
	checkEq(3, len(lr.Members), "members in the LeaveGroup answer")
	for _, m := range lr.Members {
		if m.MemberID == "unknown-member" {
			checkCode(kerr.UnknownMemberID, m.ErrorCode, "LeaveGroup of an unknown member")
		} else {
			checkCode(nil, m.ErrorCode, "LeaveGroup of "+m.MemberID)
		}
	}

	// Request validation.
	checkCode(kerr.InvalidGroupID, join(a, "", "", 10000).ErrorCode, "JoinGroup with an empty group id")
	checkCode(kerr.InvalidSessionTimeout, join(a, group+"-t", "", 1000).ErrorCode, "JoinGroup with a session timeout below group.min.session.timeout.ms")
	checkCode(kerr.InvalidSessionTimeout, join(a, group+"-t", "", 400000).ErrorCode, "JoinGroup with a session timeout above group.max.session.timeout.ms")

	consumerGroupErrors(a, topic, group+"-848", commit)
}

// consumerGroupErrors: ConsumerGroupHeartbeat (KIP-848) error codes.
func consumerGroupErrors(a *rawConn, topic, group string, commit func(*rawConn, string, string, int32, string, string) int16) {
	hb := func(memberID string, epoch int32, assignor string, topics []string) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group = group
		req.MemberID = memberID
		req.MemberEpoch = epoch
		if epoch == 0 {
			req.RebalanceTimeoutMillis = 10000
			req.SubscribedTopicNames = topics
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			if assignor != "" {
				req.ServerAssignor = &assignor
			}
		}
		return a.send(a.cl, req).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	r := hb(newMemberID(), 0, "no-such-assignor", []string{topic})
	checkCode(kerr.UnsupportedAssignor, r.ErrorCode, "ConsumerGroupHeartbeat with an unknown server assignor")
	id := newMemberID()
	r = hb(id, 0, "uniform", []string{topic})
	checkCode(nil, r.ErrorCode, "ConsumerGroupHeartbeat join")
	check(r.MemberEpoch >= 1, "member epoch after joining: %d", r.MemberEpoch)
	check(r.HeartbeatIntervalMillis > 0, "heartbeat interval %d", r.HeartbeatIntervalMillis)
	epoch := r.MemberEpoch
	checkCode(kerr.UnknownMemberID, hb(newMemberID(), 1, "", nil).ErrorCode, "ConsumerGroupHeartbeat of an unknown member at epoch 1")
	checkCode(kerr.FencedMemberEpoch, hb(id, epoch+5, "", nil).ErrorCode, "ConsumerGroupHeartbeat with a wrong epoch")
	// The member was fenced: it has to rejoin at epoch 0 (with the same id).
	r = hb(id, 0, "uniform", []string{topic})
	checkCode(nil, r.ErrorCode, "rejoin at epoch 0")
	epoch = r.MemberEpoch
	// OffsetCommit v9 carries the member epoch in the generation field.
	checkCode(nil, commit(a, group, id, epoch, topic, ""), "OffsetCommit of a consumer-group member at its epoch")
	checkCode(kerr.StaleMemberEpoch, commit(a, group, id, epoch+5, topic, ""), "OffsetCommit of a consumer-group member at a wrong epoch")
	checkCode(kerr.UnknownMemberID, commit(a, group, newMemberID(), epoch, topic, ""), "OffsetCommit of an unknown consumer-group member")
	r = hb(id, -1, "", nil)
	checkCode(nil, r.ErrorCode, "leave with epoch -1")
	checkEq(int32(-1), r.MemberEpoch, "member epoch after leaving")
}

// newMemberID makes a member id the way KIP-848 clients do (a random 16-byte UUID in base64).
func newMemberID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
