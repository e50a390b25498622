//! The cleaner of one shard: a background task, in a task queue of its own with a small
//! share of the shard's time, so requests run first. Each round it looks at the shard's
//! open compacted logs, picks the dirtiest one that is due (dirty ratio at or above
//! `min.cleanable.dirty.ratio`, or dirty for longer than `max.compaction.lag.ms`) and
//! cleans it once; when none is due it waits [`CleanerConfig::backoff`].
//!
//! At most [`CleanerConfig::threads`] shards of the process run a pass at the same time.
//! Where each log's previous pass ended (and the earliest delete horizon it kept) is read
//! from the log's cleaner checkpoint when the cleaner first sees the log open at an epoch
//! ([`crate::compaction::cleaner_checkpoint`]), and kept in memory from then on; every
//! pass writes it back. So after a restart or a takeover the dirty ratio and the first
//! pass start where the last one ended, as with Kafka's `cleaner-offset-checkpoint`.
//!
//! Only a log's leader cleans it: a log open here at a fence epoch was opened by this
//! broker as the leader at that epoch, and every swap checks for a newer claim first
//! ([`crate::compaction::swap`]). A pass that finds one gives up its result and the log is
//! fenced, as after a flush.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::compaction::config::CleanerConfig;
use crate::compaction::partition_cleaner::{self, PassOutcome};
use crate::compaction::stats::CleanerStats;
use crate::compaction::throttle::Throttle;
use crate::log_manager::{now_ms, LogManager, PartitionId};
use crate::PartitionLog;

/// Shards running a pass right now, process-wide.
static CLEANING: AtomicUsize = AtomicUsize::new(0);

/// A slot among the `threads` allowed to clean at once; released on drop.
struct CleaningSlot;

impl CleaningSlot {
    fn take(threads: usize) -> Option<Self> {
        CLEANING
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |running| {
                (running < threads.max(1)).then_some(running + 1)
            })
            .ok()
            .map(|_| CleaningSlot)
    }
}

impl Drop for CleaningSlot {
    fn drop(&mut self) {
        CLEANING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The cleaner of one shard's logs.
pub struct ShardCleaner {
    manager: Weak<LogManager>,
    config: CleanerConfig,
    throttle: Throttle,
    /// Where each log's last pass ended, and the fence epoch the log was open at.
    first_dirty: RefCell<HashMap<PartitionId, (u32, u64)>>,
    /// The earliest delete horizon each log's last pass kept.
    horizons: RefCell<HashMap<PartitionId, i64>>,
    stats: RefCell<CleanerStats>,
}

impl ShardCleaner {
    /// Starts the cleaner of `manager`'s logs on the current shard. It stops when the
    /// manager is dropped.
    pub fn spawn(manager: &Rc<LogManager>, config: CleanerConfig) -> Rc<ShardCleaner> {
        let cleaner = Rc::new(ShardCleaner {
            manager: Rc::downgrade(manager),
            config,
            throttle: Throttle::new(config.io_bytes_per_second),
            first_dirty: RefCell::new(HashMap::new()),
            horizons: RefCell::new(HashMap::new()),
            stats: RefCell::new(CleanerStats::default()),
        });
        let task = {
            let cleaner = Rc::downgrade(&cleaner);
            async move {
                loop {
                    let Some(running) = cleaner.upgrade() else {
                        return;
                    };
                    let cleaned = running.run_once(now_ms()).await;
                    let pause = if cleaned {
                        std::time::Duration::from_millis(10)
                    } else {
                        running.config.backoff
                    };
                    drop(running);
                    glommio::timer::sleep(pause).await;
                }
            }
        };
        let queue = glommio::executor().create_task_queue(
            glommio::Shares::Static(50),
            glommio::Latency::NotImportant,
            "log-cleaner",
        );
        match glommio::spawn_local_into(task, queue) {
            Ok(task) => task.detach(),
            Err(error) => {
                tracing::error!(%error, "log cleaner could not start");
                return cleaner;
            }
        };
        cleaner
    }

    /// The counters so far (a copy).
    pub fn stats(&self) -> CleanerStats {
        self.stats.borrow().clone()
    }

    /// One round: refreshes every compacted log's dirty ratio and cleans the dirtiest that
    /// is due. Returns whether a pass ran.
    pub async fn run_once(&self, now_ms: i64) -> bool {
        let Some(manager) = self.manager.upgrade() else {
            return false;
        };
        let mut best: Option<(f64, PartitionId, PartitionLog, u64)> = None;
        let open = manager.open_partitions();
        {
            let mut stats = self.stats.borrow_mut();
            stats.partitions.retain(|id, _| open.contains(id));
            // A log opened again starts from its checkpoint.
            self.first_dirty
                .borrow_mut()
                .retain(|id, _| open.contains(id));
            self.horizons.borrow_mut().retain(|id, _| open.contains(id));
        }
        for id in open {
            let Some(log) = manager.get(&id) else {
                continue;
            };
            let Some(config) = log.config().compaction else {
                continue;
            };
            let Some(first_dirty) = self.first_dirty_of(&id, &log).await else {
                continue;
            };
            let Ok(dirty) = partition_cleaner::dirty_state(&log, first_dirty, &config, now_ms)
            else {
                continue;
            };
            self.stats
                .borrow_mut()
                .partitions
                .entry(id.clone())
                .or_default()
                .dirty_ratio = dirty.ratio();
            let horizon_passed = self
                .horizons
                .borrow()
                .get(&id)
                .is_some_and(|horizon| *horizon <= now_ms);
            if (dirty.due(&config, now_ms) || horizon_passed)
                && best
                    .as_ref()
                    .is_none_or(|(ratio, ..)| dirty.ratio() > *ratio)
            {
                best = Some((dirty.ratio(), id, log, first_dirty));
            }
        }
        drop(manager);
        let Some((_, id, log, first_dirty)) = best else {
            return false;
        };
        let Some(_slot) = CleaningSlot::take(self.config.threads) else {
            return false;
        };
        let Some(config) = log.config().compaction else {
            return false;
        };
        let result = partition_cleaner::clean_log(
            &log,
            first_dirty,
            &config,
            &self.config,
            &self.throttle,
            now_ms,
        )
        .await;
        self.record(&id, result, now_ms);
        true
    }

    /// Where `log`'s next pass starts: what its last pass here left, or its checkpoint
    /// when the cleaner sees it open at this epoch for the first time. `None` when the
    /// checkpoint cannot be read now (the log is looked at again next round).
    async fn first_dirty_of(&self, id: &PartitionId, log: &PartitionLog) -> Option<u64> {
        let epoch = log.fence_epoch();
        let known = self.first_dirty.borrow().get(id).copied();
        let first_dirty = match known {
            Some((known_epoch, first_dirty)) if known_epoch == epoch => first_dirty,
            // A fenced or poisoned log is not cleaned; it is left alone until it closes.
            _ if log.is_fenced() || log.is_poisoned() => return None,
            _ => {
                let checkpoint = match partition_cleaner::load_checkpoint(log).await {
                    Ok(checkpoint) => checkpoint,
                    Err(error) => {
                        tracing::warn!(partition = %id, %error, "cannot read the cleaner checkpoint");
                        return None;
                    }
                };
                self.first_dirty
                    .borrow_mut()
                    .insert(id.clone(), (epoch, checkpoint.cleaned_up_to));
                let mut horizons = self.horizons.borrow_mut();
                match checkpoint.earliest_delete_horizon {
                    Some(horizon) => horizons.insert(id.clone(), horizon),
                    None => horizons.remove(id),
                };
                checkpoint.cleaned_up_to
            }
        };
        Some(first_dirty.max(log.offsets().log_start_offset))
    }

    fn record(&self, id: &PartitionId, result: crate::Result<Option<PassOutcome>>, now_ms: i64) {
        let mut stats = self.stats.borrow_mut();
        match result {
            Ok(Some(outcome)) => {
                stats.passes += 1;
                stats.bytes_read += outcome.bytes_read;
                stats.bytes_written += outcome.bytes_written;
                stats.segments_swapped += outcome.segments_swapped as u64;
                let entry = stats.partitions.entry(id.clone()).or_default();
                entry.last_clean_ms = Some(now_ms);
                if let Some((_, first_dirty)) = self.first_dirty.borrow_mut().get_mut(id) {
                    *first_dirty = outcome.cleaned_up_to;
                }
                match outcome.earliest_delete_horizon {
                    Some(horizon) => self.horizons.borrow_mut().insert(id.clone(), horizon),
                    None => self.horizons.borrow_mut().remove(id),
                };
            }
            Ok(None) => {}
            Err(error) => {
                stats.failed_passes += 1;
                tracing::warn!(partition = %id, %error, "log cleaning failed");
            }
        }
    }
}
