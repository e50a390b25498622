//! Appending to a partition log: validation, the idempotent producers' check, offsets,
//! the leader epoch stamp, the copy into the write-behind buffer (and the tail cache), and
//! the producer state each stored batch changes (transactions it opens or ends).

use crate::batch::{self, BatchHeader};
use crate::config::{LogConfig, TimestampType};
use crate::error::{EngineError, Result};
use crate::producer_state::SequenceCheck;

use super::{AppendOutcome, LogState, PartitionLog};

/// Appends keep the newest batches in memory while a read happened this recently.
const READERS_ACTIVE_FOR: std::time::Duration = std::time::Duration::from_secs(5);

/// How the batches of one append are written: the same for every batch of it.
pub(super) struct StoreBatch<'a> {
    pub leader_epoch: i32,
    pub log_append_time: Option<i64>,
    pub readers_active: bool,
    pub now_ms: i64,
    pub config: &'a LogConfig,
}

impl PartitionLog {
    /// Validates and appends one or more concatenated record batches (as a producer sends
    /// them for one partition), assigning offsets and stamping `leader_epoch`. Returns once
    /// the bytes are in the write-behind buffer; use [`PartitionLog::flush_to`] to wait for
    /// durability. A batch failing validation or the producer check appends nothing.
    pub async fn append(
        &self,
        records: &[u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendOutcome> {
        let config = self.config();
        let checks = batch::record_rules::RecordChecks {
            rules: config.record_rules,
            timestamp_type: config.timestamp_type,
            now_ms,
        };
        let summaries = batch::validate_produced_batches(records, config.max_batch_bytes, &checks)?;
        let _permit = self.lock_appends().await?;
        self.shared.state.borrow().check_usable()?;

        if let Some(outcome) = self.check_producers(&summaries)? {
            return Ok(outcome);
        }
        let total: u64 = summaries.iter().map(|s| s.range.len() as u64).sum();
        if self.needs_roll(total, now_ms, &config)? {
            self.roll(now_ms).await?;
        }

        let mut state = self.shared.state.borrow_mut();
        state.check_usable()?;
        let store = self.store_batch_for(leader_epoch, now_ms, &config);
        let base_offset = state.next_offset;
        store.assign_epoch(&mut state);
        for summary in &summaries {
            store.store(
                &mut state,
                &records[summary.range.clone()],
                u64::from(summary.record_count),
            )?;
        }
        Ok(AppendOutcome {
            base_offset,
            last_offset: state.next_offset - 1,
            log_append_time: store.log_append_time,
            duplicate: false,
            log_start_offset: state.log_start_offset,
        })
    }

    /// Appends and waits until the batches are durable.
    pub async fn append_durable(
        &self,
        records: &[u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendOutcome> {
        let outcome = self.append(records, leader_epoch, now_ms).await?;
        self.flush_to(outcome.last_offset + 1).await?;
        Ok(outcome)
    }

    /// How the batches of an append at `now_ms` are written.
    pub(super) fn store_batch_for<'a>(
        &self,
        leader_epoch: i32,
        now_ms: i64,
        config: &'a LogConfig,
    ) -> StoreBatch<'a> {
        self.shared.last_append_ms.set(now_ms);
        let readers_active = self
            .shared
            .last_read
            .get()
            .is_some_and(|at| at.elapsed() < READERS_ACTIVE_FOR);
        StoreBatch {
            leader_epoch,
            log_append_time: (config.timestamp_type == TimestampType::LogAppendTime)
                .then_some(now_ms),
            readers_active,
            now_ms,
            config,
        }
    }

    /// Idempotence: `Some` with the original offsets when the batches are retries.
    fn check_producers(&self, summaries: &[batch::BatchSummary]) -> Result<Option<AppendOutcome>> {
        let state = self.shared.state.borrow();
        let mut duplicate = None;
        for summary in summaries {
            let header = &summary.header;
            if header.is_transactional() && !header.has_producer_id() {
                // There is no transaction to join: a read-committed reader would take it
                // for committed data.
                return Err(EngineError::InvalidBatch(
                    batch::BatchError::InvalidRecords(
                        "a transactional batch without a producer id",
                    ),
                ));
            }
            match state.producers.check(
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                header.last_sequence(),
                header.is_transactional(),
            )? {
                SequenceCheck::Append => {}
                SequenceCheck::Duplicate {
                    first_offset,
                    last_offset,
                } => {
                    duplicate = Some((first_offset as u64, last_offset as u64));
                }
            }
        }
        match duplicate {
            Some((base_offset, last_offset)) if summaries.len() == 1 => Ok(Some(AppendOutcome {
                base_offset,
                last_offset,
                log_append_time: None,
                duplicate: true,
                log_start_offset: state.log_start_offset,
            })),
            Some(_) => Err(EngineError::InvalidBatch(
                batch::BatchError::InvalidRecords(
                    "a retried batch cannot share a request with new batches",
                ),
            )),
            None => Ok(None),
        }
    }
}

impl StoreBatch<'_> {
    /// Records the append's leader epoch from the log end, if it is new.
    pub fn assign_epoch(&self, state: &mut LogState) {
        if state.epochs.latest_epoch() < Some(self.leader_epoch) {
            let base_offset = state.next_offset;
            state.epochs.assign(self.leader_epoch, base_offset);
        }
    }

    /// Writes one batch of `record_count` offsets at the log end: stamps it (offset, leader
    /// epoch, append time), copies it into the write-behind buffer (and the tail cache
    /// while readers are active), indexes it, and applies it to the producer state (a
    /// marker ending an aborted transaction adds its entry to the active segment's
    /// transaction index). Returns its stamped header.
    pub fn store(
        &self,
        state: &mut LogState,
        batch: &[u8],
        record_count: u64,
    ) -> Result<BatchHeader> {
        let offset = state.next_offset;
        let next_offset = offset + record_count;
        let (header, position) = if self.readers_active || self.log_append_time.is_some() {
            // Stamp a copy in the tail cache, which then serves the readers.
            let stamped = state
                .tail_cache
                .push_stamped(batch, offset, next_offset, |bytes| {
                    batch::stamp_for_append(
                        bytes,
                        offset as i64,
                        self.leader_epoch,
                        self.log_append_time,
                    )
                })?;
            (BatchHeader::parse(stamped)?, state.appender.append(stamped))
        } else {
            // Nobody is reading: copy once, straight into the write buffer, with the
            // header stamped on the side (offset and epoch lie outside the CRC).
            let mut head = [0u8; batch::BATCH_HEADER_LEN];
            head.copy_from_slice(&batch[..batch::BATCH_HEADER_LEN]);
            head[batch::BASE_OFFSET_POS..][..8].copy_from_slice(&(offset as i64).to_be_bytes());
            head[batch::PARTITION_LEADER_EPOCH_POS..][..4]
                .copy_from_slice(&self.leader_epoch.to_be_bytes());
            let position = state.appender.append(&head);
            state.appender.append(&batch[batch::BATCH_HEADER_LEN..]);
            (BatchHeader::parse(&head)?, position)
        };
        let active = state.active_mut()?;
        active.record_batch(&header, position, self.now_ms, self.config);
        // The records section is the same bytes stamped or not.
        let records = &batch[batch::BATCH_HEADER_LEN..header.total_len()];
        let completed = state.producers.replay_stored_batch(&header, records);
        if let Some(aborted) = completed.and_then(|txn| txn.aborted_txn()) {
            state.active_mut()?.txn_index.push(aborted);
        }
        // Strictly greater: the first batch reaching the maximum keeps it, as in Kafka.
        if state
            .max_timestamp
            .is_none_or(|(ts, _)| header.max_timestamp > ts)
        {
            state.max_timestamp = Some((header.max_timestamp, next_offset - 1));
        }
        state.next_offset = next_offset;
        Ok(header)
    }
}
