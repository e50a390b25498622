//! Random interleavings of a current group coordinator and stale ones on one group store:
//! commits, offset deletions, metadata, transactional (pending) commits and transaction
//! completions by any of them, takeovers at a newer epoch (sometimes skipping one) and
//! crash reopens. Every apply by a stale coordinator fails `Fenced`; after every takeover
//! or reopen the store holds exactly what the current coordinators acknowledged: committed
//! offsets, metadata and every producer's pending offsets, with a completed transaction's
//! offset committed only where no commit was written after it (the model keeps the order).

mod common;

use std::collections::BTreeMap;

use bytes::Bytes;
use common::run;
use kaas_engine::{CommittedOffset, EngineError, GroupChange, GroupStore, Storage};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Commit { partition: i32 },
    Pending { producer: i64, partition: i32 },
    Complete { producer: i64, commit: bool },
    Delete { partition: i32 },
    Metadata { len: usize },
    Stale { which: usize, partition: i32 },
    Takeover { epoch_step: u32 },
    CrashReopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0i32..4).prop_map(|partition| Op::Commit { partition }),
        4 => (0i64..3, 0i32..4).prop_map(|(producer, partition)| Op::Pending { producer, partition }),
        2 => (0i64..3, any::<bool>()).prop_map(|(producer, commit)| Op::Complete { producer, commit }),
        1 => (0i32..4).prop_map(|partition| Op::Delete { partition }),
        1 => (0usize..64).prop_map(|len| Op::Metadata { len }),
        3 => (0usize..2, 0i32..4).prop_map(|(which, partition)| Op::Stale { which, partition }),
        2 => (1u32..3).prop_map(|epoch_step| Op::Takeover { epoch_step }),
        1 => Just(Op::CrashReopen),
    ]
}

fn commit(partition: i32, offset: i64) -> GroupChange {
    GroupChange::Commit {
        topic: "t".into(),
        partition,
        committed: CommittedOffset {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: 1,
        },
    }
}

fn pending(producer_id: i64, partition: i32, offset: i64) -> GroupChange {
    GroupChange::PendingCommit {
        producer_id,
        producer_epoch: 0,
        topic: "t".into(),
        partition,
        committed: CommittedOffset {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: 1,
        },
    }
}

#[derive(Default, PartialEq, Debug)]
struct State {
    offsets: BTreeMap<i32, i64>,
    metadata: Option<Bytes>,
    /// Pending offsets by producer, then partition.
    pending: BTreeMap<i64, BTreeMap<i32, i64>>,
}

fn state_of(store: &GroupStore) -> State {
    State {
        offsets: store
            .offsets()
            .into_iter()
            .map(|(_, partition, committed)| (partition, committed.offset))
            .collect(),
        metadata: store.metadata(),
        pending: store
            .pending_producers()
            .into_iter()
            .map(|(producer, _)| {
                let offsets = store
                    .pending_offsets(producer)
                    .into_iter()
                    .map(|(_, partition, committed)| (partition, committed.offset))
                    .collect();
                (producer, offsets)
            })
            .collect(),
    }
}

/// What the current coordinators acknowledged, with the order of the writes: the offsets
/// are the model's write counter at each write, so a later write has a larger one.
#[derive(Default)]
struct Model {
    state: State,
}

impl Model {
    fn commit(&mut self, partition: i32, offset: i64) {
        self.state.offsets.insert(partition, offset);
    }

    fn pending(&mut self, producer: i64, partition: i32, offset: i64) {
        self.state
            .pending
            .entry(producer)
            .or_default()
            .insert(partition, offset);
    }

    fn complete(&mut self, producer: i64, commit: bool) {
        let Some(offsets) = self.state.pending.remove(&producer) else {
            return;
        };
        if !commit {
            return;
        }
        for (partition, offset) in offsets {
            // Offsets grow with every write: a larger committed one was written later.
            let current = self.state.offsets.entry(partition).or_insert(offset);
            *current = (*current).max(offset);
        }
    }

    fn delete(&mut self, partition: i32) {
        self.state.offsets.remove(&partition);
        for offsets in self.state.pending.values_mut() {
            offsets.remove(&partition);
        }
        self.state.pending.retain(|_, offsets| !offsets.is_empty());
    }
}

async fn check(storage: Storage, ops: Vec<Op>) {
    let mut epoch = 1;
    let mut current = GroupStore::open_at_epoch(&storage, "g", epoch)
        .await
        .expect("open at epoch 1");
    let mut stale: Vec<GroupStore> = Vec::new();
    let mut acked = Model::default();
    let mut next_offset = 0i64;
    for op in ops {
        next_offset += 1;
        match op {
            Op::Commit { partition } => {
                current
                    .apply(vec![commit(partition, next_offset)])
                    .await
                    .expect("the current coordinator commits");
                acked.commit(partition, next_offset);
            }
            Op::Pending {
                producer,
                partition,
            } => {
                current
                    .apply(vec![pending(producer, partition, next_offset)])
                    .await
                    .expect("the current coordinator writes a pending commit");
                acked.pending(producer, partition, next_offset);
            }
            Op::Complete { producer, commit } => {
                current
                    .apply(vec![GroupChange::CompleteTransaction {
                        producer_id: producer,
                        producer_epoch: 0,
                        commit,
                    }])
                    .await
                    .expect("the current coordinator completes a transaction");
                acked.complete(producer, commit);
            }
            Op::Delete { partition } => {
                current
                    .apply(vec![GroupChange::DeleteOffset {
                        topic: "t".into(),
                        partition,
                    }])
                    .await
                    .expect("the current coordinator deletes an offset");
                acked.delete(partition);
            }
            Op::Metadata { len } => {
                let blob = Bytes::from(vec![next_offset as u8; len]);
                current
                    .apply(vec![GroupChange::Metadata(blob.clone())])
                    .await
                    .expect("the current coordinator writes metadata");
                acked.state.metadata = (!blob.is_empty()).then_some(blob);
            }
            Op::Stale { which, partition } => {
                if let Some(store) = stale.get(which) {
                    let change = if partition % 2 == 0 {
                        commit(partition, -next_offset)
                    } else {
                        pending(i64::from(partition), partition, -next_offset)
                    };
                    let result = store.apply(vec![change]).await;
                    assert!(
                        matches!(result, Err(EngineError::Fenced { .. })),
                        "a stale apply returned {result:?}"
                    );
                }
            }
            Op::Takeover { epoch_step } => {
                epoch += epoch_step;
                let new = GroupStore::open_at_epoch(&storage, "g", epoch)
                    .await
                    .expect("take over");
                stale.insert(0, std::mem::replace(&mut current, new));
                stale.truncate(2);
            }
            Op::CrashReopen => {
                stale.clear();
                current = GroupStore::open_at_epoch(&storage, "g", epoch)
                    .await
                    .expect("reopen");
            }
        }
        assert_eq!(state_of(&current), acked.state);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn in_memory(ops in prop::collection::vec(op(), 1..60)) {
        run(move || async move { check(Storage::memory(), ops).await });
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn on_disk(ops in prop::collection::vec(op(), 1..60)) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().to_path_buf();
        run(move || async move { check(Storage::disk(root), ops).await });
    }
}
