//! Random interleavings of a current leader and stale ones on one partition directory:
//! appends, flushes, checkpoints and rolls by any of them, takeovers at a newer epoch
//! (sometimes skipping one) and crash reopens. After every takeover or reopen the log
//! must be exactly what was acknowledged, followed by a prefix of what the current leader
//! had appended but not yet acknowledged (a crash may keep or drop that), and nothing a
//! fenced leader appended. Every durable append by a stale leader fails `Fenced`.

mod common;

use common::{batch, disk_storage, partition_dir, read_all, run, stamped};
use kaas_engine::{EngineError, LogConfig, PartitionLog, Storage};
use proptest::prelude::*;

const NOW: i64 = 1_700_000_000_000;

#[derive(Clone, Debug)]
enum Op {
    Append {
        durable: bool,
        records: usize,
        value_len: usize,
    },
    Flush,
    Checkpoint,
    StaleAppend {
        which: usize,
        durable: bool,
    },
    StaleFlush {
        which: usize,
    },
    StaleCheckpoint {
        which: usize,
    },
    Takeover {
        epoch_step: u32,
    },
    CrashReopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<bool>(), 1usize..4, 20usize..400).prop_map(|(durable, records, value_len)| {
            Op::Append { durable, records, value_len }
        }),
        2 => Just(Op::Flush),
        1 => Just(Op::Checkpoint),
        3 => (0usize..2, any::<bool>()).prop_map(|(which, durable)| Op::StaleAppend { which, durable }),
        1 => (0usize..2).prop_map(|which| Op::StaleFlush { which }),
        1 => (0usize..2).prop_map(|which| Op::StaleCheckpoint { which }),
        2 => (1u32..3).prop_map(|epoch_step| Op::Takeover { epoch_step }),
        1 => Just(Op::CrashReopen),
    ]
}

type Batches = Vec<(u64, Vec<u8>)>;

struct Model {
    storage: Storage,
    config: LogConfig,
    epoch: u32,
    current: PartitionLog,
    /// Newest first; at most two are kept.
    stale: Vec<PartitionLog>,
    acked: Batches,
    /// Appended by the current leader, not yet acknowledged.
    pending: Batches,
    seed: u64,
}

impl Model {
    fn next_seed(&mut self) -> u64 {
        self.seed += 1;
        self.seed
    }

    /// The new handle holds `acked` followed by a prefix of `pending`; that becomes the
    /// acknowledged state (its recovery made it durable and recorded it).
    async fn check_recovered(&mut self) {
        let read = read_all(&self.current, 0, 1 << 20).await;
        let got: Batches = read
            .iter()
            .map(|b| (b.base_offset, b.bytes.to_vec()))
            .collect();
        assert!(got.len() >= self.acked.len(), "acknowledged batches lost");
        assert!(
            got[..self.acked.len()] == self.acked[..],
            "acknowledged batches changed"
        );
        let tail = &got[self.acked.len()..];
        assert!(
            tail.len() <= self.pending.len() && tail == &self.pending[..tail.len()],
            "the log holds batches nobody appended before the claim"
        );
        self.acked = got;
        self.pending.clear();
    }

    async fn apply(&mut self, op: Op) {
        match op {
            Op::Append {
                durable,
                records,
                value_len,
            } => {
                let seed = self.next_seed();
                let produced = batch(seed, records, value_len, NOW, None);
                let leader_epoch = self.epoch as i32;
                let outcome = if durable {
                    self.current
                        .append_durable(&produced, leader_epoch, NOW)
                        .await
                } else {
                    self.current.append(&produced, leader_epoch, NOW).await
                }
                .expect("the current leader appends");
                self.pending.push((
                    outcome.base_offset,
                    stamped(&produced, outcome.base_offset, leader_epoch),
                ));
                if durable {
                    self.acked.append(&mut self.pending);
                }
            }
            Op::Flush => {
                self.current
                    .flush()
                    .await
                    .expect("the current leader flushes");
                self.acked.append(&mut self.pending);
            }
            Op::Checkpoint => {
                self.current
                    .checkpoint()
                    .await
                    .expect("the current leader checkpoints");
                self.acked.append(&mut self.pending);
            }
            Op::StaleAppend { which, durable } => {
                let seed = self.next_seed();
                let Some(stale) = self.stale.get(which) else {
                    return;
                };
                let produced = batch(seed, 2, 100, NOW, None);
                let epoch = stale.fence_epoch() as i32;
                if durable {
                    let result = stale.append_durable(&produced, epoch, NOW).await;
                    assert!(
                        matches!(result, Err(EngineError::Fenced { .. })),
                        "a stale durable append returned {result:?}"
                    );
                } else {
                    let result = stale.append(&produced, epoch, NOW).await;
                    assert!(
                        matches!(result, Ok(_) | Err(EngineError::Fenced { .. })),
                        "{result:?}"
                    );
                }
            }
            Op::StaleFlush { which } => {
                if let Some(stale) = self.stale.get(which) {
                    let result = stale.flush().await;
                    // Ok only when it had nothing to write.
                    assert!(
                        matches!(result, Ok(()) | Err(EngineError::Fenced { .. })),
                        "{result:?}"
                    );
                    if result.is_ok() {
                        let offsets = stale.offsets();
                        assert_eq!(offsets.high_watermark, offsets.log_end_offset);
                    }
                }
            }
            Op::StaleCheckpoint { which } => {
                if let Some(stale) = self.stale.get(which) {
                    let result = stale.checkpoint().await;
                    assert!(
                        matches!(result, Ok(()) | Err(EngineError::Fenced { .. })),
                        "{result:?}"
                    );
                }
            }
            Op::Takeover { epoch_step } => {
                self.epoch += epoch_step;
                let new = PartitionLog::open_at_epoch(
                    &self.storage,
                    &partition_dir(),
                    self.config.clone(),
                    self.epoch,
                )
                .await
                .expect("take over");
                let old = std::mem::replace(&mut self.current, new);
                self.stale.insert(0, old);
                self.stale.truncate(2);
                self.check_recovered().await;
            }
            Op::CrashReopen => {
                self.stale.clear();
                // Dropping without close is a crash: no flush, no checkpoint.
                self.current = PartitionLog::open_at_epoch(
                    &self.storage,
                    &partition_dir(),
                    self.config.clone(),
                    self.epoch,
                )
                .await
                .expect("reopen");
                self.check_recovered().await;
            }
        }
    }
}

async fn check(storage: Storage, ops: Vec<Op>) {
    let config = LogConfig {
        segment_bytes: 3000,
        index_interval_bytes: 700,
        ..LogConfig::default()
    };
    let current = PartitionLog::open_at_epoch(&storage, &partition_dir(), config.clone(), 1)
        .await
        .expect("open at epoch 1");
    let mut model = Model {
        storage,
        config,
        epoch: 1,
        current,
        stale: Vec::new(),
        acked: Vec::new(),
        pending: Vec::new(),
        seed: 0,
    };
    for op in ops {
        model.apply(op).await;
    }
    model.apply(Op::Takeover { epoch_step: 1 }).await;
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
        run(move || async move {
            let storage = disk_storage(&root).await;
            check(storage, ops).await;
        });
    }
}
