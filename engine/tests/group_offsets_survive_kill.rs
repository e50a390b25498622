//! Property: a change acknowledged by `GroupStore::apply` survives `kill -9`, and an apply
//! is atomic.
//!
//! The test binary runs itself again as a writer process (the environment tells it to).
//! The writer opens a group store on disk and applies from several tasks at once on one
//! executor (so flushes are group commits). Task `k` commits offset `n` to partition `k` of
//! two topics in one apply, with a large metadata string so that the file is compacted
//! every few hundred applies, and prints a line for every acknowledgement. The parent kills
//! the writer with SIGKILL a random 5–300 ms after its first acknowledgement, reopens the
//! store and checks that
//!
//! - every partition holds at least the last acknowledged offset and at most one more (a
//!   task has one apply in flight);
//! - both topics hold the same offset for each partition (the apply was all or nothing);
//! - the store takes a new apply.
//!
//! Then the next round starts a new writer on the same store. The random seed is printed
//! and can be replayed with `KAAS_GROUP_KILL_TEST_SEED`.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use kaas_engine::{CommittedOffset, GroupChange, GroupStore};
use rand::{Rng, SeedableRng};

const CHILD_ROOT: &str = "KAAS_GROUP_KILL_TEST_WRITER_ROOT";
const SEED: &str = "KAAS_GROUP_KILL_TEST_SEED";
const ROUNDS: u64 = 6;
const TASKS: i32 = 6;
const GROUP: &str = "group/with odd.id";

fn committed(offset: i64) -> CommittedOffset {
    CommittedOffset {
        offset,
        leader_epoch: 1,
        metadata: format!("{offset:0>4096}"),
        commit_timestamp_ms: offset,
    }
}

fn changes(task: i32, offset: i64) -> Vec<GroupChange> {
    ["a", "b"]
        .iter()
        .map(|topic| GroupChange::Commit {
            topic: (*topic).to_owned(),
            partition: task,
            committed: committed(offset),
        })
        .collect()
}

#[test]
fn group_offsets_survive_kill() {
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
    // Highest acknowledged offset per task.
    let mut acked: BTreeMap<i32, i64> = BTreeMap::new();
    let mut compacted_rounds = 0;
    for round in 1..=ROUNDS {
        let delay = Duration::from_millis(rng.random_range(5..=300));
        let (acks, compactions) = run_writer_and_kill(&root, round, delay);
        assert!(!acks.is_empty(), "round {round}: nothing acknowledged");
        eprintln!(
            "round {round}: {} applies acknowledged, {compactions} compactions seen, killed \
             {delay:?} after the first",
            acks.len()
        );
        if compactions > 0 {
            compacted_rounds += 1;
        }
        for (task, offset) in acks {
            let highest = acked.entry(task).or_insert(offset);
            *highest = (*highest).max(offset);
        }
        verify(&root, round, &acked);
    }
    assert!(compacted_rounds > 0, "no round compacted the file");
}

fn run_writer_and_kill(root: &Path, round: u64, delay: Duration) -> (Vec<(i32, i64)>, u64) {
    let parse = |line: &str| -> Option<(i32, i64)> {
        let mut fields = line.strip_prefix("ACK ")?.trim_end().split(' ');
        Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
    };
    let compactions =
        |line: &str| -> Option<u64> { line.strip_prefix("COMPACTIONS ")?.trim_end().parse().ok() };
    let printed = common::child_writer::run_and_kill(
        "group_offsets_survive_kill",
        &[(CHILD_ROOT, root.display().to_string())],
        &root.join(format!("writer-{round}.stderr")),
        round,
        delay,
        |line| parse(line).is_some(),
    );
    let acks = printed.iter().filter_map(|line| parse(line)).collect();
    let seen_compactions = printed
        .iter()
        .filter_map(|line| compactions(line))
        .max()
        .unwrap_or(0);
    (acks, seen_compactions)
}

/// Reopens the store and checks every acknowledged offset and the atomicity of applies.
fn verify(root: &Path, round: u64, acked: &BTreeMap<i32, i64>) {
    let root = root.to_path_buf();
    let acked = acked.clone();
    common::run(move || async move {
        let storage = common::disk_storage(&root).await;
        assert_eq!(
            GroupStore::list(&storage).await.expect("list"),
            vec![GROUP.to_owned()]
        );
        let store = GroupStore::open(&storage, GROUP)
            .await
            .expect("open after kill");
        for (task, highest) in &acked {
            let a = store.offset("a", *task).map(|c| c.offset);
            let b = store.offset("b", *task).map(|c| c.offset);
            assert_eq!(a, b, "round {round}: task {task}: an apply was split");
            let found = a.unwrap_or_else(|| {
                panic!("round {round}: task {task}: acknowledged offset {highest} lost")
            });
            assert!(
                found == *highest || found == highest + 1,
                "round {round}: task {task}: acknowledged {highest}, found {found}"
            );
            assert_eq!(store.offset("a", *task), Some(committed(found)));
        }
        store
            .apply(changes(TASKS, round as i64))
            .await
            .expect("apply after recovery");
    });
}

/// The writer process: applies until it is killed.
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
            let start = store.offset("a", task).map_or(0, |c| c.offset + 1);
            tasks.push(glommio::spawn_local(async move {
                for offset in start.. {
                    store
                        .apply(changes(task, offset))
                        .await
                        .expect("durable apply");
                    let mut out = out.borrow_mut();
                    writeln!(out, "ACK {task} {offset}").expect("stdout");
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
