package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Group members shared by the consumer-group scenarios. A member consumes one topic in a group,
// commits synchronously after processing every poll and reports what it does as event lines:
//
//	M <member id> <generation>    after a poll, whenever the member id or generation changed
//	A <partition> <committed>     a partition was assigned; the group's committed offset for it
//	                              at that moment (-1 when nothing was committed)
//	V <partition>                 a partition was revoked or lost
//	R <partition> <offset>        a record was processed (and then committed)
//
// The same member runs inside the scenario process or as a child process (`-member`), which
// writes the lines to stdout so that the scenario can SIGKILL it like a crashed consumer.

// memberSpec configures one group member.
type memberSpec struct {
	Topic     string
	Group     string
	Instance  string // group.instance.id; empty for a dynamic member
	Balancer  string // "cooperative-sticky" (default), "range", "roundrobin"
	NextGen   bool   // KIP-848 ConsumerGroupHeartbeat with a server-side assignor
	SessionMs int
}

func (s memberSpec) args() []string {
	a := []string{"-topic", s.Topic, "-group", s.Group, "-balancer", s.Balancer,
		"-session-ms", strconv.Itoa(s.SessionMs)}
	if s.Instance != "" {
		a = append(a, "-instance", s.Instance)
	}
	if s.NextGen {
		a = append(a, "-next-gen")
	}
	return a
}

// member is one running group consumer.
type member struct {
	name   string
	spec   memberSpec
	mu     sync.Mutex
	events []string
	stop   chan struct{}
	done   chan struct{}
	err    error
	cmd    *exec.Cmd // set for a child process
}

func (m *member) emit(line string) {
	m.mu.Lock()
	m.events = append(m.events, line)
	m.mu.Unlock()
}

func (m *member) snapshot() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.events...)
}

// memberID returns the last member id the member reported ("" before it joined).
func (m *member) memberID() (string, int32) {
	ev := m.snapshot()
	for i := len(ev) - 1; i >= 0; i-- {
		if strings.HasPrefix(ev[i], "M ") {
			f := strings.Fields(ev[i])
			g, _ := strconv.Atoi(f[2])
			return f[1], int32(g)
		}
	}
	return "", -1
}

// owned is the member's own view of its assignment, rebuilt from its A/V events.
func (m *member) owned() map[int32]bool {
	own := map[int32]bool{}
	for _, e := range m.snapshot() {
		f := strings.Fields(e)
		switch f[0] {
		case "A":
			p, _ := strconv.Atoi(f[1])
			own[int32(p)] = true
		case "V":
			p, _ := strconv.Atoi(f[1])
			delete(own, int32(p))
		}
	}
	return own
}

func (m *member) count(kind string) int {
	n := 0
	for _, e := range m.snapshot() {
		if strings.HasPrefix(e, kind+" ") {
			n++
		}
	}
	return n
}

func memberOpts(s memberSpec, adm *kadm.Client, emit func(string)) []kgo.Opt {
	assigned := func(ctx context.Context, _ *kgo.Client, m map[string][]int32) {
		// The group's committed offsets at assignment time, before the client fetches them.
		cctx, cancel := timeout()
		defer cancel()
		offs, err := adm.FetchOffsetsForTopics(cctx, s.Group, s.Topic)
		if err == nil {
			err = offs.Error()
		}
		for _, p := range sortedParts(m[s.Topic]) {
			committed := int64(-1)
			if err != nil {
				emit(fmt.Sprintf("E fetching committed offsets at assignment: %v", err))
			} else if o, ok := offs.Lookup(s.Topic, p); ok && o.At >= 0 {
				committed = o.At
			}
			emit(fmt.Sprintf("A %d %d", p, committed))
		}
	}
	revoked := func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
		for _, p := range sortedParts(m[s.Topic]) {
			emit(fmt.Sprintf("V %d", p))
		}
	}
	opts := []kgo.Opt{
		kgo.ConsumerGroup(s.Group),
		kgo.ConsumeTopics(s.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(assigned),
		kgo.OnPartitionsRevoked(revoked),
		kgo.OnPartitionsLost(revoked),
		kgo.HeartbeatInterval(time.Second),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}
	if s.SessionMs > 0 {
		opts = append(opts, kgo.SessionTimeout(time.Duration(s.SessionMs)*time.Millisecond))
	}
	switch s.Balancer {
	case "range":
		opts = append(opts, kgo.Balancers(kgo.RangeBalancer()))
	case "roundrobin":
		opts = append(opts, kgo.Balancers(kgo.RoundRobinBalancer()))
	default:
		opts = append(opts, kgo.Balancers(kgo.CooperativeStickyBalancer()))
	}
	if s.NextGen {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	if s.Instance != "" {
		opts = append(opts, kgo.InstanceID(s.Instance))
	}
	return opts
}

func sortedParts(ps []int32) []int32 {
	out := append([]int32(nil), ps...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// runMember consumes until stop is closed, then commits and closes the client (which leaves the
// group unless the member is static). Errors go to the event stream as "E" lines.
func runMember(c *Ctx, s memberSpec, emit func(string), stop <-chan struct{}) {
	adm, closeAdm := c.Admin()
	defer closeAdm()
	cl := c.Client(memberOpts(s, adm, emit)...)
	lastID, lastGen := "", int32(-2)
	defer func() {
		ctx, cancel := timeout()
		defer cancel()
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			emit(fmt.Sprintf("E final commit: %v", err))
		}
		cl.AllowRebalance()
		cl.Close()
	}()
	for {
		select {
		case <-stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		fetches := cl.PollRecords(ctx, 50)
		cancel()
		if fetches.IsClientClosed() {
			return
		}
		fetches.EachError(func(t string, p int32, err error) {
			if err != context.DeadlineExceeded && err != context.Canceled {
				emit(fmt.Sprintf("E fetch %s/%d: %v", t, p, err))
			}
		})
		recs := fetches.Records()
		for _, r := range recs {
			emit(fmt.Sprintf("R %d %d", r.Partition, r.Offset))
		}
		if len(recs) > 0 {
			cctx, ccancel := timeout()
			if err := cl.CommitRecords(cctx, recs...); err != nil {
				emit(fmt.Sprintf("C commit failed: %v", err))
			}
			ccancel()
			time.Sleep(20 * time.Millisecond) // keep consumption going across the rebalances
		}
		if id, gen := cl.GroupMetadata(); id != "" && (id != lastID || gen != lastGen) {
			lastID, lastGen = id, gen
			emit(fmt.Sprintf("M %s %d", id, gen))
		}
		cl.AllowRebalance()
	}
}

// startMember runs a member in a goroutine of this process.
func startMember(c *Ctx, name string, s memberSpec) *member {
	m := &member{name: name, spec: s, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		defer func() {
			if r := recover(); r != nil {
				m.emit(fmt.Sprintf("E panic: %v", r))
			}
		}()
		runMember(c, s, m.emit, m.stop)
	}()
	return m
}

// close stops an in-process member (commit, then leave unless static) and waits for it.
func (m *member) close() {
	if m.cmd != nil {
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
	} else {
		close(m.stop)
	}
	select {
	case <-m.done:
	case <-time.After(opTimeout):
		failf("member %s did not stop within %v", m.name, opTimeout)
	}
}

// kill SIGKILLs a child member: it dies without committing or leaving.
func (m *member) kill() {
	check(m.cmd != nil, "member %s is not a child process", m.name)
	must(m.cmd.Process.Kill(), "SIGKILL "+m.name)
	<-m.done
}

// spawnMember runs a member as a child process of this program (`-member`), reading its events
// from the child's stdout.
func spawnMember(c *Ctx, name string, s memberSpec) *member {
	exe, err := os.Executable()
	must(err, "finding the scenarios executable")
	args := append([]string{"-bootstrap", c.Bootstrap, "-member"}, s.args()...)
	cmd := exec.Command(exe, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	must(err, "child stdout")
	must(cmd.Start(), "starting child member "+name)
	m := &member{name: name, spec: s, done: make(chan struct{}), cmd: cmd}
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			m.emit(sc.Text())
		}
		_ = cmd.Wait()
	}()
	return m
}

// memberMain is the child-process side of spawnMember: it consumes until SIGTERM (commit, close)
// or SIGKILL.
func memberMain(c *Ctx, s memberSpec) {
	w := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	emit := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = io.WriteString(w, line+"\n")
		_ = w.Flush()
	}
	stop := make(chan struct{})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		close(stop)
	}()
	defer func() {
		if r := recover(); r != nil {
			emit(fmt.Sprintf("E %v", r))
			os.Exit(1)
		}
	}()
	runMember(c, s, emit, stop)
}

// ---- checks over the members' event streams -------------------------------------------------

// checkMemberEvents asserts, for one member: no error events; after every assignment of a
// partition the first record it processes from it is the committed offset at assignment time
// (the log start, 0, when nothing was committed), and the following ones are dense; no record
// of a partition it does not own. Adds the processed offsets to seen and returns how many
// takeovers it checked that started from a committed offset above 0.
func checkMemberEvents(m *member, seen map[int32]map[int64]bool) int {
	resumed := 0
	next := map[int32]int64{} // expected next offset per owned partition; -1: first record pending
	first := map[int32]int64{}
	for _, e := range m.snapshot() {
		f := strings.Fields(e)
		switch f[0] {
		case "E":
			failf("member %s: %s", m.name, e)
		case "A":
			p, _ := strconv.Atoi(f[1])
			committed, _ := strconv.ParseInt(f[2], 10, 64)
			if committed < 0 {
				committed = 0
			}
			first[int32(p)] = committed
			next[int32(p)] = -1
		case "V":
			p, _ := strconv.Atoi(f[1])
			delete(next, int32(p))
		case "R":
			p64, _ := strconv.Atoi(f[1])
			p := int32(p64)
			off, _ := strconv.ParseInt(f[2], 10, 64)
			want, owned := next[p]
			check(owned, "member %s processed %d/%d without owning partition %d", m.name, p, off, p)
			if want == -1 {
				check(off == first[p], "member %s: first record from newly assigned partition %d is offset %d, but the group's committed offset at assignment was %d",
					m.name, p, off, first[p])
				if off > 0 {
					resumed++
				}
			} else {
				check(off == want, "member %s: partition %d jumped from %d to %d", m.name, p, want-1, off)
			}
			next[p] = off + 1
			if seen[p] == nil {
				seen[p] = map[int64]bool{}
			}
			seen[p][off] = true
		}
	}
	return resumed
}

// waitSettled waits until the group is Stable with exactly the given members (by member id), the
// described assignment covers every partition of the topic exactly once, and each member's own
// view of its partitions matches what the group describes. Returns the assignment by member name.
func waitSettled(adm *kadm.Client, group, topic string, partitions int, members []*member, limit time.Duration) map[string][]int32 {
	var last string
	var result map[string][]int32
	deadline := time.Now().Add(limit)
	for {
		ok, why, res := settledNow(adm, group, topic, partitions, members)
		if ok {
			result = res
			break
		}
		last = why
		if time.Now().After(deadline) {
			failf("group %s did not settle with %d members within %v: %s", group, len(members), limit, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return result
}

func settledNow(adm *kadm.Client, group, topic string, partitions int, members []*member) (bool, string, map[string][]int32) {
	byID := map[string]*member{}
	for _, m := range members {
		id, _ := m.memberID()
		if id == "" {
			return false, m.name + " has not joined yet", nil
		}
		byID[id] = m
	}
	ctx, cancel := timeout()
	defer cancel()
	described, err := describeAssignment(ctx, adm, group, topic)
	if err != nil {
		return false, err.Error(), nil
	}
	if described.state != "Stable" {
		return false, "state " + described.state, nil
	}
	if len(described.members) != len(members) {
		return false, fmt.Sprintf("%d members described", len(described.members)), nil
	}
	cover := map[int32]int{}
	res := map[string][]int32{}
	for id, parts := range described.members {
		m, ok := byID[id]
		if !ok {
			return false, "unexpected member " + id, nil
		}
		own := m.owned()
		if len(own) != len(parts) {
			return false, fmt.Sprintf("%s owns %v but the group assigned %v", m.name, own, parts), nil
		}
		for _, p := range parts {
			cover[p]++
			if !own[p] {
				return false, fmt.Sprintf("%s owns %v but the group assigned %v", m.name, own, parts), nil
			}
		}
		res[m.name] = sortedParts(parts)
	}
	for p := int32(0); p < int32(partitions); p++ {
		if cover[p] != 1 {
			return false, fmt.Sprintf("partition %d assigned %d times", p, cover[p]), nil
		}
	}
	return true, "", res
}

type groupView struct {
	state   string
	members map[string][]int32 // member id -> partitions of the topic
}

// describeAssignment describes a classic group (DescribeGroups) or, failing that, a KIP-848
// consumer group (ConsumerGroupDescribe).
func describeAssignment(ctx context.Context, adm *kadm.Client, group, topic string) (groupView, error) {
	dg, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return groupView{}, err
	}
	d := dg[group]
	if d.Err == nil && d.ProtocolType == "consumer" {
		v := groupView{state: d.State, members: map[string][]int32{}}
		for _, m := range d.Members {
			a, ok := m.Assigned.AsConsumer()
			var parts []int32
			if ok {
				for _, t := range a.Topics {
					if t.Topic == topic {
						parts = append(parts, t.Partitions...)
					}
				}
			}
			v.members[m.MemberID] = parts
		}
		return v, nil
	}
	cg, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		return groupView{}, err
	}
	c := cg[group]
	if c.Err != nil {
		return groupView{}, c.Err
	}
	v := groupView{state: c.State, members: map[string][]int32{}}
	for _, m := range c.Members {
		var parts []int32
		for p := range m.Assignment[topic] {
			parts = append(parts, p)
		}
		v.members[m.MemberID] = sortedParts(parts)
	}
	return v, nil
}

// checkCoverage asserts that the processed offsets cover [0, end) of every partition.
// checkGroupConsumption checks every member's events (no committed record read again after
// an assignment, reads dense) and that together they consumed every offset up to ends.
func checkGroupConsumption(all []*member, ends map[int32]int64) {
	seen := map[int32]map[int64]bool{}
	resumed := 0
	for _, m := range all {
		resumed += checkMemberEvents(m, seen)
	}
	check(resumed > 0, "no partition changed hands after records were committed; nothing was checked")
	checkCoverage(seen, ends)
}

// closeAndCheckGone closes m, which leaves the group (how: `how`), and checks the broker no
// longer lists it right away, without waiting for its session to end.
func closeAndCheckGone(adm *kadm.Client, group, topic string, m *member, how string) {
	id, _ := m.memberID()
	m.close()
	ctx, cancel := timeout()
	view, err := describeAssignment(ctx, adm, group, topic)
	cancel()
	must(err, "describing the group after a member left")
	_, still := view.members[id]
	check(!still, "member %s left (%s) but the group still lists it", id, how)
}

func checkCoverage(seen map[int32]map[int64]bool, ends map[int32]int64) {
	for p, end := range ends {
		for o := int64(0); o < end; o++ {
			if !seen[p][o] {
				failf("record %d/%d (end offset %d) was never processed by any member", p, o, end)
			}
		}
	}
}

// waitCommittedAtEnd waits until the group's committed offsets equal the end offsets.
func waitCommittedAtEnd(adm *kadm.Client, group, topic string, limit time.Duration) map[int32]int64 {
	ends := endOffsets(adm, topic)
	var why string
	defer func() {
		if r := recover(); r != nil {
			failf("%v (last: %s)", r, why)
		}
	}()
	waitUntil("committed offsets to reach the end offsets", limit, func() bool {
		ctx, cancel := timeout()
		defer cancel()
		offs, err := adm.FetchOffsetsForTopics(ctx, group, topic)
		if err != nil {
			why = err.Error()
			return false
		}
		for p, end := range ends {
			o, ok := offs.Lookup(topic, p)
			if !ok || o.Err != nil || o.At != end {
				why = fmt.Sprintf("partition %d committed %v, end %d", p, o.At, end)
				return false
			}
		}
		return true
	})
	return ends
}
