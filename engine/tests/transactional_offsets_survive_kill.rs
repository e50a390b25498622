//! Property: pending transactional offsets and transaction completions acknowledged by
//! `GroupStore::apply` survive `kill -9`, through compactions, and each apply is atomic.
//!
//! The test binary runs itself again as a writer process (the environment tells it to).
//! The writer opens a group store on disk and runs one task per transactional producer on
//! one executor (so flushes are group commits). Task `k` (producer `k`) repeats one
//! transaction after another: one to three pending commits, each of the next offset `n`
//! to partition `k` of topics `a` and `b` in one apply (replacing the previous one; with a
//! large metadata string, so the file is compacted every few hundred applies; the number
//! varies by task and transaction, so that compactions find tasks in every phase), then,
//! in one apply, the transaction's completion (a commit, except when `n` is a multiple of
//! three, an abort) and a plain commit of `n` to partition `k` of topic `progress` (where
//! the next transaction starts). Each step follows from the store's state
//! alone, and the writer prints a line for every acknowledged apply with the number of
//! steps the task has had acknowledged so far (so a line lost to the test harness's own
//! output costs nothing). The parent kills the
//! writer with SIGKILL a random 5–300 ms after its first acknowledgement, reopens the store
//! and checks, for each task, that
//!
//! - topics `a` and `b` agree, committed and pending (an apply was all or nothing);
//! - the state is the one reached by the acknowledged steps from the state before the
//!   round, or one step further (a task has one apply in flight);
//! - the store takes a new apply.
//!
//! Then the next round starts a new writer on the same store. The random seed is printed
//! and can be replayed with `KAAS_TXN_OFFSETS_KILL_TEST_SEED`.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use kaas_engine::{CommittedOffset, GroupChange, GroupStore};
use rand::{Rng, SeedableRng};

const CHILD_ROOT: &str = "KAAS_TXN_OFFSETS_KILL_TEST_WRITER_ROOT";
const SEED: &str = "KAAS_TXN_OFFSETS_KILL_TEST_SEED";
const ROUNDS: u64 = 6;
const TASKS: i32 = 6;
const GROUP: &str = "txn-group";

fn committed(offset: i64) -> CommittedOffset {
    CommittedOffset {
        offset,
        leader_epoch: 1,
        metadata: format!("{offset:0>4096}"),
        commit_timestamp_ms: offset,
    }
}

/// One task's state: its last transaction number, the committed offset of `a`/`b`, and
/// the pending one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct TaskState {
    progress: i64,
    committed: Option<i64>,
    pending: Option<i64>,
}

/// The next step of task `task` from `state`: the changes of its apply and the state after.
fn next_step(task: i32, state: TaskState) -> (Vec<GroupChange>, TaskState) {
    let producer_id = i64::from(task);
    let pending_steps = 1 + (i64::from(task) + state.progress) % 3;
    let pending_value = |n: i64| -> Vec<GroupChange> {
        ["a", "b"]
            .iter()
            .map(|topic| GroupChange::PendingCommit {
                producer_id,
                producer_epoch: 0,
                topic: (*topic).to_owned(),
                partition: task,
                committed: committed(n),
            })
            .collect()
    };
    match state.pending {
        Some(n) if n - state.progress < pending_steps => {
            let after = TaskState {
                pending: Some(n + 1),
                ..state
            };
            (pending_value(n + 1), after)
        }
        Some(n) => {
            let commit = n % 3 != 0;
            let changes = vec![
                GroupChange::CompleteTransaction {
                    producer_id,
                    producer_epoch: 0,
                    commit,
                },
                GroupChange::Commit {
                    topic: "progress".into(),
                    partition: task,
                    committed: CommittedOffset {
                        offset: n,
                        leader_epoch: -1,
                        metadata: String::new(),
                        commit_timestamp_ms: n,
                    },
                },
            ];
            let after = TaskState {
                progress: n,
                committed: if commit { Some(n) } else { state.committed },
                pending: None,
            };
            (changes, after)
        }
        None => {
            let n = state.progress + 1;
            let after = TaskState {
                pending: Some(n),
                ..state
            };
            (pending_value(n), after)
        }
    }
}

/// Task `task`'s state in `store`, checking that topics `a` and `b` agree.
fn state_of(store: &GroupStore, task: i32, round: u64) -> TaskState {
    let offset = |topic: &str| store.offset(topic, task).map(|c| c.offset);
    let committed = offset("a");
    assert_eq!(
        committed,
        offset("b"),
        "round {round}: task {task}: a commit was split"
    );
    if let Some(n) = committed {
        assert_eq!(store.offset("a", task), Some(self::committed(n)));
    }
    let pending: BTreeMap<String, CommittedOffset> = store
        .pending_offsets(i64::from(task))
        .into_iter()
        .filter(|(_, partition, _)| *partition == task)
        .map(|(topic, _, committed)| (topic, committed))
        .collect();
    let pending_a = pending.get("a").cloned();
    assert_eq!(
        pending_a,
        pending.get("b").cloned(),
        "round {round}: task {task}: a pending commit was split"
    );
    if let Some(pending) = &pending_a {
        assert_eq!(pending, &self::committed(pending.offset));
    }
    TaskState {
        progress: offset("progress").unwrap_or(0),
        committed,
        pending: pending_a.map(|c| c.offset),
    }
}

#[test]
fn transactional_offsets_survive_kill() {
    if let Ok(root) = std::env::var(CHILD_ROOT) {
        writer(PathBuf::from(root));
        return;
    }
    let seed = std::env::var(SEED)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    eprintln!("{SEED}={seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    let mut states: BTreeMap<i32, TaskState> = (0..TASKS)
        .map(|task| (task, TaskState::default()))
        .collect();
    let mut compacted_rounds = 0;
    let mut aborted_seen = false;
    for round in 1..=ROUNDS {
        let delay = Duration::from_millis(rng.random_range(5..=300));
        let (acks, compactions) = run_writer_and_kill(&root, round, delay);
        let total: u64 = acks.values().sum();
        assert!(total > 0, "round {round}: nothing acknowledged");
        eprintln!(
            "round {round}: {total} applies acknowledged, {compactions} compactions seen, \
             killed {delay:?} after the first"
        );
        if compactions > 0 {
            compacted_rounds += 1;
        }
        let found = verify(&root, round, &states, &acks);
        for (task, state) in &found {
            aborted_seen |= state.progress % 3 == 0 && state.progress > 0;
            states.insert(*task, *state);
        }
    }
    assert!(compacted_rounds > 0, "no round compacted the file");
    assert!(aborted_seen, "no transaction was aborted");
}

/// Runs one writer and kills it: acknowledged applies per task, and the most compactions
/// it reported.
fn run_writer_and_kill(root: &Path, round: u64, delay: Duration) -> (BTreeMap<i32, u64>, u64) {
    let parse = |line: &str| -> Option<(i32, u64)> {
        let mut fields = line.strip_prefix("ACK ")?.trim_end().split(' ');
        Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
    };
    let compactions =
        |line: &str| -> Option<u64> { line.strip_prefix("COMPACTIONS ")?.trim_end().parse().ok() };
    let printed = common::child_writer::run_and_kill(
        "transactional_offsets_survive_kill",
        &[(CHILD_ROOT, root.display().to_string())],
        &root.join(format!("writer-{round}.stderr")),
        round,
        delay,
        |line| parse(line).is_some(),
    );
    let mut acks = BTreeMap::new();
    for (task, steps) in printed.iter().filter_map(|line| parse(line)) {
        let highest = acks.entry(task).or_insert(steps);
        *highest = (*highest).max(steps);
    }
    let seen_compactions = printed
        .iter()
        .filter_map(|line| compactions(line))
        .max()
        .unwrap_or(0);
    (acks, seen_compactions)
}

/// Reopens the store and checks every task against the steps it acknowledged from
/// `before`; returns the states found.
fn verify(
    root: &Path,
    round: u64,
    before: &BTreeMap<i32, TaskState>,
    acks: &BTreeMap<i32, u64>,
) -> BTreeMap<i32, TaskState> {
    let root = root.to_path_buf();
    let before = before.clone();
    let acks = acks.clone();
    let (sender, receiver) = std::sync::mpsc::channel();
    common::run(move || async move {
        let storage = common::disk_storage(&root).await;
        let store = GroupStore::open(&storage, GROUP)
            .await
            .expect("open after kill");
        let mut found = BTreeMap::new();
        for (task, start) in &before {
            let acked = acks.get(task).copied().unwrap_or(0);
            let mut expected = *start;
            for _ in 0..acked {
                expected = next_step(*task, expected).1;
            }
            let in_flight = next_step(*task, expected).1;
            let state = state_of(&store, *task, round);
            assert!(
                state == expected || state == in_flight,
                "round {round}: task {task}: {acked} applies acknowledged from {start:?}: \
                 expected {expected:?} (or {in_flight:?} in flight), found {state:?}"
            );
            found.insert(*task, state);
        }
        store
            .apply(vec![GroupChange::Commit {
                topic: "after".into(),
                partition: 0,
                committed: committed(round as i64),
            }])
            .await
            .expect("apply after recovery");
        sender.send(found).expect("send");
    });
    receiver.recv().expect("states")
}

/// The writer process: runs transactions until it is killed.
fn writer(root: PathBuf) {
    common::run(move || async move {
        let storage = common::disk_storage(&root).await;
        let store = GroupStore::open(&storage, GROUP)
            .await
            .expect("writer open");
        let out = Rc::new(std::cell::RefCell::new(std::io::stdout()));
        let mut tasks = Vec::new();
        for task in 0..TASKS {
            let store = store.clone();
            let out = out.clone();
            let mut state = state_of(&store, task, 0);
            tasks.push(glommio::spawn_local(async move {
                for steps in 1.. {
                    let (changes, after) = next_step(task, state);
                    store.apply(changes).await.expect("durable apply");
                    state = after;
                    let mut out = out.borrow_mut();
                    writeln!(out, "ACK {task} {steps}").expect("stdout");
                    writeln!(out, "COMPACTIONS {}", store.compaction_count()).expect("stdout");
                    out.flush().expect("stdout");
                }
            }));
        }
        for task in tasks {
            task.await;
        }
    });
}
