//! What the coordinator does on its own as time passes (Kafka's `abortTimedOutTransactions`
//! and `removeExpiredTransactionalIds`).

use crate::transactions::state::TransactionState;

use super::{Actions, EndOrigin, TransactionCoordinator, WritePurpose};

impl TransactionCoordinator {
    /// Runs whatever is due: the timed-out transaction check every
    /// `abort_timed_out_transactions_interval_ms`, the expiration check every
    /// `remove_expired_transactional_ids_interval_ms` (the first of each one interval after
    /// the coordinator was created or loaded). Call it often; it does nothing between.
    pub fn tick(&mut self, now_ms: i64) -> Actions {
        let mut actions = Actions::default();
        if now_ms >= self.next_abort_check_ms {
            self.next_abort_check_ms =
                now_ms.saturating_add(self.config.abort_timed_out_transactions_interval_ms);
            actions.merge(self.abort_timed_out_transactions(now_ms));
        }
        if now_ms >= self.next_expiration_check_ms {
            self.next_expiration_check_ms =
                now_ms.saturating_add(self.config.remove_expired_transactional_ids_interval_ms);
            actions.merge(self.expire_transactional_ids(now_ms));
        }
        actions
    }

    /// Aborts every transaction open longer than its timeout, with the epoch bumped so the
    /// producer that ran it is fenced (its next request gets PRODUCER_FENCED / an epoch
    /// error and it must re-initialize). One that is mid-change is left for the next check.
    pub fn abort_timed_out_transactions(&mut self, now_ms: i64) -> Actions {
        let mut actions = Actions::default();
        let timed_out: Vec<String> = self
            .transactions
            .values()
            .filter(|metadata| {
                !metadata.pending_transition_in_progress()
                    && metadata.state == TransactionState::Ongoing
                    && metadata
                        .start_time_ms
                        .saturating_add(i64::from(metadata.timeout_ms))
                        < now_ms
            })
            .map(|metadata| metadata.transactional_id.clone())
            .collect();
        let epoch_bump = self.config.transaction_version.supports_epoch_bump();
        for id in timed_out {
            let Some(metadata) = self.transactions.get_mut(&id) else {
                continue;
            };
            if epoch_bump
                && metadata.is_producer_epoch_exhausted()
                && self.spare_producer_ids.is_empty()
            {
                // The abort moves the producer to a new id; retried once one is supplied.
                actions.producer_ids_wanted += 1;
                continue;
            }
            let Ok(fence) = metadata.prepare_fence_producer_epoch() else {
                continue;
            };
            self.end_transaction_for_coordinator(
                &id,
                fence.producer_id,
                fence.producer_epoch,
                EndOrigin::Timeout,
                now_ms,
                &mut actions,
            );
        }
        actions
    }

    /// Forgets every settled transactional id idle for `transactional_id_expiration_ms`: a
    /// tombstone is appended, and the id is removed once it is written.
    pub fn expire_transactional_ids(&mut self, now_ms: i64) -> Actions {
        let mut actions = Actions::default();
        let horizon = now_ms.saturating_sub(self.config.transactional_id_expiration_ms);
        let expired: Vec<String> = self
            .transactions
            .values()
            .filter(|metadata| {
                metadata.pending_state.is_none()
                    && metadata.state.is_expiration_allowed()
                    && metadata.last_update_time_ms <= horizon
            })
            .map(|metadata| metadata.transactional_id.clone())
            .collect();
        for id in expired {
            let dead = self
                .transactions
                .get_mut(&id)
                .map(|metadata| metadata.prepare_dead());
            if let Some(Ok(_)) = dead {
                self.append(&id, None, WritePurpose::Expire, &mut actions);
            }
        }
        actions
    }
}
