//! `producer.id.expiration.ms`: idle idempotent producers are forgotten, as Kafka forgets them.
//!
//! Kafka's `ProducerStateManager.removeExpiredProducers` runs every
//! `producer.id.expiration.check.interval.ms` (10 minutes) on every partition and drops each
//! producer whose last batch's timestamp is `producer.id.expiration.ms` (1 day) or more in the
//! past. Each shard does the same for the logs it has open ([`spawn`]); a partition opened later
//! is covered at the shard's next check. Without this a partition's producers were bounded only
//! by the engine's per-partition cap (100,000, least recently used first).
//!
//! A forgotten producer is one the partition does not know: its next batch is accepted at any
//! sequence (Kafka 4.4 does the same, it no longer answers UNKNOWN_PRODUCER_ID), and a retry of
//! one of its old batches is stored again rather than recognised. That is why the expiration
//! is a day by default: far longer than any producer's retries.
//!
//! The clock is the wall clock, because batch timestamps are (CreateTime set by the producer,
//! or LogAppendTime set on append). [`expire_idle_producers`] takes the time as an argument so
//! tests inject it.

use std::rc::Rc;
use std::time::Duration;

use kaas_engine::log_manager::LogManager;
use kaas_engine::periodic::spawn_every;

use crate::shard::Shard;

/// Kafka's default `producer.id.expiration.ms`: one day.
pub const DEFAULT_EXPIRATION_MS: i32 = 86_400_000;
/// Kafka's default `producer.id.expiration.check.interval.ms`: ten minutes.
pub const DEFAULT_CHECK_INTERVAL_MS: i32 = 600_000;

/// The two broker settings (both Kafka `INT`s, at least 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerExpiration {
    /// `producer.id.expiration.ms`: a producer idle this long is forgotten.
    pub expiration_ms: i32,
    /// `producer.id.expiration.check.interval.ms`: how often each shard looks.
    pub check_interval_ms: i32,
}

impl Default for ProducerExpiration {
    fn default() -> Self {
        ProducerExpiration {
            expiration_ms: DEFAULT_EXPIRATION_MS,
            check_interval_ms: DEFAULT_CHECK_INTERVAL_MS,
        }
    }
}

/// One check over every log open on a shard at `now_ms`; returns how many producers went.
pub fn expire_idle_producers(logs: &LogManager, now_ms: i64, expiration_ms: i32) -> usize {
    logs.open_partitions()
        .iter()
        .filter_map(|id| logs.get(id))
        .map(|log| log.remove_expired_producers(now_ms, i64::from(expiration_ms)))
        .sum()
}

/// Runs [`expire_idle_producers`] on `shard` every check interval until the shard is dropped.
/// It only waits on its own shard's timer, so its handle may be kept (README, glommio bug).
pub fn spawn(shard: &Rc<Shard>, settings: ProducerExpiration) -> glommio::task::JoinHandle<()> {
    let interval = Duration::from_millis(settings.check_interval_ms.max(1) as u64);
    spawn_every(
        Rc::downgrade(shard),
        interval,
        move |shard: Rc<Shard>| async move {
            let now_ms = kaas_engine::log_manager::now_ms();
            let expired = expire_idle_producers(&shard.logs, now_ms, settings.expiration_ms);
            if expired > 0 {
                tracing::debug!(
                    expired,
                    "idle producers forgotten (producer.id.expiration.ms)"
                );
            }
        },
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::future::Future;
    use std::pin::Pin;

    use kaas_engine::batch::encode_batch_for_tests;
    use kaas_engine::config::LogConfig;
    use kaas_engine::error::EngineError;
    use kaas_engine::log_manager::PartitionId;
    use kaas_engine::storage::Storage;

    use super::*;

    const PRODUCER: i64 = 4_242;
    const SENT_AT_MS: i64 = 1_700_000_000_000;

    fn on_executor(test: impl FnOnce() -> Pin<Box<dyn Future<Output = ()>>> + Send + 'static) {
        glommio::LocalExecutorBuilder::default()
            .spawn(test)
            .expect("executor")
            .join()
            .expect("join");
    }

    fn batch(sequence: i32) -> Vec<u8> {
        encode_batch_for_tests(&[(None, Some(b"v"))], SENT_AT_MS, PRODUCER, 0, sequence)
    }

    #[test]
    fn a_producer_idle_for_the_expiration_is_forgotten_on_every_open_log() {
        on_executor(|| {
            Box::pin(async {
                let logs = LogManager::new(Storage::memory());
                let ids = [PartitionId::new("t", 0), PartitionId::new("t", 1)];
                for id in &ids {
                    let log = logs.open(id, LogConfig::default()).await.expect("open");
                    log.append_durable(&batch(0), 0, SENT_AT_MS)
                        .await
                        .expect("append");
                }
                let log = logs.get(&ids[0]).expect("open");
                // Still known: a gap in its sequence is refused.
                let gap = log.append_durable(&batch(5), 0, SENT_AT_MS).await;
                assert!(
                    matches!(gap, Err(EngineError::ProducerState(_))),
                    "expected out of order, got {gap:?}"
                );
                let expiration = 60_000;
                assert_eq!(
                    expire_idle_producers(&logs, SENT_AT_MS + 59_999, expiration),
                    0,
                    "idle for less than the expiration"
                );
                assert_eq!(
                    expire_idle_producers(&logs, SENT_AT_MS + 60_000, expiration),
                    2,
                    "idle for the expiration, on both partitions"
                );
                // Forgotten: the same batch is now that of an unknown producer.
                let outcome = log
                    .append_durable(&batch(5), 0, SENT_AT_MS + 60_000)
                    .await
                    .expect("an unknown producer is accepted at any sequence");
                assert!(!outcome.duplicate);
                assert_eq!(log.producers().len(), 1);
            })
        });
    }
}
