// Command scenarios drives a Kafka-compatible broker with franz-go (kgo, kadm and raw kmsg
// requests) and checks every answer.
//
//	go build -o scenarios . && ./scenarios -bootstrap 127.0.0.1:9092 -scenario all
//
// Every scenario checks its own results and prints "PASS <scenario>"; on a mismatch it prints
// "FAIL <scenario>: <reason>" and the program exits 1. Topics get random suffixes, so scenarios
// can run one after another against the same broker; every wait is bounded.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"time"
)

// scenarioLimit is the most any one scenario may take.
const scenarioLimit = 10 * time.Minute

type scenario struct {
	name string
	run  func(*Ctx)
}

var scenarios = []scenario{
	{"produce-consume", produceConsume},
	{"fetch-limits", fetchLimits},
	{"decompressed-limits", decompressedLimits},
	{"long-poll", longPoll},
	{"idempotence", idempotence},
	{"auto-create", autoCreate},
	{"admin", adminOps},
	{"list-offsets", listOffsets},
	{"delete-records", deleteRecords},
	{"errors", errorCases},
	{"protocol", protocol},
	{"group-rebalance", groupRebalance},
	{"group-static", groupStatic},
	{"group-kip848", groupKIP848},
	{"group-admin", groupAdmin},
	{"group-errors", groupErrors},
	{"txn-commit-abort", txnCommitAbort},
	{"txn-group-session", txnGroupSession},
}

// phases are scenarios that only run when named (never with "all"): the two halves of a test
// that restarts the broker between them. They take -topic and -group.
var phases = []scenario{
	{"group-resume-commit", groupResumeCommit},
	{"group-resume-check", groupResumeCheck},
	{"cluster-produce", clusterProduce},
	{"cluster-moves", clusterMoves},
}

func main() {
	bootstrap := flag.String("bootstrap", "", "broker address host:port (required)")
	which := flag.String("scenario", "all", "scenario name, comma-separated names, or all")
	records := flag.Int("records", 2000, "records per produce/consume run")
	seed := flag.Int64("seed", time.Now().UnixNano(), "random seed")
	list := flag.Bool("list", false, "list scenarios and exit")
	topic := flag.String("topic", "", "topic for group-resume-commit/-check and -member")
	group := flag.String("group", "", "group for group-resume-commit/-check and -member")
	member := flag.Bool("member", false, "run one group member (used by the group scenarios as a child process)")
	instance := flag.String("instance", "", "with -member: group.instance.id")
	balancer := flag.String("balancer", "cooperative-sticky", "with -member: cooperative-sticky, range or roundrobin")
	nextGen := flag.Bool("next-gen", false, "with -member: KIP-848 consumer group protocol")
	sessionMs := flag.Int("session-ms", groupSessionMs, "with -member: session timeout (classic protocol)")
	flag.Parse()
	if *list {
		for _, s := range scenarios {
			fmt.Println(s.name)
		}
		for _, s := range phases {
			fmt.Println(s.name + " (only when named; needs -topic and -group)")
		}
		return
	}
	if *bootstrap == "" {
		fmt.Fprintln(os.Stderr, "-bootstrap is required")
		flag.Usage()
		os.Exit(2)
	}
	ctx := &Ctx{Bootstrap: *bootstrap, Records: *records, Seed: *seed, Topic: *topic, Group: *group}
	if *member {
		memberMain(ctx, memberSpec{Topic: *topic, Group: *group, Instance: *instance, Balancer: *balancer,
			NextGen: *nextGen, SessionMs: *sessionMs})
		return
	}
	var toRun []scenario
	if *which == "all" {
		toRun = scenarios
	} else {
		for _, name := range strings.Split(*which, ",") {
			found := false
			for _, s := range append(scenarios[:len(scenarios):len(scenarios)], phases...) {
				if s.name == name {
					toRun = append(toRun, s)
					found = true
				}
			}
			if !found {
				fmt.Fprintf(os.Stderr, "unknown scenario %q\n", name)
				os.Exit(2)
			}
		}
	}
	fmt.Printf("go scenarios: franz-go %s, bootstrap %s, seed %d, records %d\n",
		moduleVersion("github.com/twmb/franz-go"), *bootstrap, *seed, *records)
	passed := 0
	for _, s := range toRun {
		start := time.Now()
		// Every wait inside a scenario is bounded; this is the last line of defence.
		name := s.name
		watchdog := time.AfterFunc(scenarioLimit, func() {
			fmt.Printf("FAIL %s: did not finish within %v\n", name, scenarioLimit)
			fmt.Printf("%d passed, 1 failed\n", passed)
			os.Exit(1)
		})
		err := runOne(s, ctx)
		watchdog.Stop()
		if err != nil {
			fmt.Printf("FAIL %s: %v\n", s.name, err)
			fmt.Printf("%d passed, 1 failed\n", passed)
			os.Exit(1)
		}
		passed++
		fmt.Printf("PASS %s (%.1fs)\n", s.name, time.Since(start).Seconds())
	}
	fmt.Printf("%d passed, 0 failed\n", passed)
}

// runOne runs a scenario, turning a failure (a panic raised by the check helpers, or any other
// panic) into an error.
func runOne(s scenario, ctx *Ctx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if f, ok := r.(failure); ok {
				err = f
				return
			}
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	s.run(ctx)
	return nil
}

func moduleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "unknown"
}
