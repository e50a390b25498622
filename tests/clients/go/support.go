package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// opTimeout bounds every single request or wait.
const opTimeout = 30 * time.Second

// Ctx carries the settings shared by all scenarios.
type Ctx struct {
	Bootstrap string
	Records   int
	Seed      int64
	Topic     string // -topic, for the scenarios that take one
	Group     string // -group, for the scenarios that take one
}

// Rnd returns a deterministic random source for one part of a scenario.
func (c *Ctx) Rnd(salt string) *rand.Rand {
	h := int64(0)
	for _, ch := range salt {
		h = h*31 + int64(ch)
	}
	return rand.New(rand.NewSource(c.Seed ^ h))
}

// Client builds a franz-go client for the broker with the given extra options. The caller
// closes it.
func (c *Ctx) Client(opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append(c.baseOpts(), opts...)...)
	must(err, "creating client")
	return cl
}

// baseOpts are the options every client of the scenarios starts from.
func (c *Ctx) baseOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(c.Bootstrap),
		kgo.ClientID("kaas-go"),
		kgo.DialTimeout(10 * time.Second),
		kgo.RetryTimeout(opTimeout),
		kgo.MetadataMinAge(200 * time.Millisecond),
		kgo.MetadataMaxAge(5 * time.Second),
		// No RecordDeliveryTimeout: franz-go measures it from each record's Timestamp, and the
		// scenarios produce records stamped up to an hour in the past. Retries bound it instead.
		kgo.RecordRetries(50),
	}
}

// Admin builds a kadm client over a fresh kgo client; close both with the returned func.
func (c *Ctx) Admin() (*kadm.Client, func()) {
	cl := c.Client()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(opTimeout / time.Millisecond))
	return adm, cl.Close
}

type failure struct{ msg string }

func (f failure) Error() string { return f.msg }

func failf(format string, args ...any) {
	panic(failure{fmt.Sprintf(format, args...)})
}

func check(cond bool, format string, args ...any) {
	if !cond {
		failf(format, args...)
	}
}

func checkEq[T comparable](want, got T, what string) {
	if want != got {
		failf("%s: expected %v but got %v", what, want, got)
	}
}

func must(err error, what string) {
	if err != nil {
		failf("%s: %v", what, err)
	}
}

// checkErr asserts err is (or wraps) the wanted Kafka error.
func checkErr(want, got error, what string) {
	if !errors.Is(got, want) {
		failf("%s: expected error %v but got %v", what, want, got)
	}
}

func timeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), opTimeout)
}

func waitUntil(what string, limit time.Duration, cond func() bool) {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			failf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func uniqueTopic(name string) string {
	return fmt.Sprintf("go-%s-%010x", name, rand.Int63()&0xffffffffff)
}

// createTopic creates a topic with replication factor 1 and waits until it is usable.
func createTopic(adm *kadm.Client, topic string, partitions int32, configs map[string]*string) kadm.CreateTopicResponse {
	ctx, cancel := timeout()
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, configs, topic)
	must(err, "CreateTopics "+topic)
	must(resp.Err, "CreateTopics "+topic)
	waitForTopic(adm, topic, int(partitions))
	return resp
}

// waitForTopic waits until Metadata lists every partition with a leader and ListOffsets answers
// for each. (Real Kafka can show a leader a moment before the partition accepts requests; an
// acks=0 produce in that window is silently dropped.)
func waitForTopic(adm *kadm.Client, topic string, partitions int) {
	waitUntil("topic "+topic+" to be ready", opTimeout, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		td, err := adm.ListTopics(ctx, topic)
		if err != nil || td[topic].Err != nil || len(td[topic].Partitions) != partitions {
			return false
		}
		for _, p := range td[topic].Partitions {
			if p.Leader < 0 || p.Err != nil {
				return false
			}
		}
		offs, err := adm.ListEndOffsets(ctx, topic)
		if err != nil || offs.Error() != nil {
			return false
		}
		n := 0
		offs.Each(func(kadm.ListedOffset) { n++ })
		return n == partitions
	})
}

func strp(s string) *string { return &s }
