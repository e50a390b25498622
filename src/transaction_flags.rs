//! Transaction coordinator flags (Kafka's `transaction.*` broker settings, with its names and
//! defaults).

use clap::Args;
use kaas_net::transactions::coordinator::CoordinatorConfig;

/// Settings of the transaction coordinators.
#[derive(Args, Debug, Clone)]
pub struct TransactionFlags {
    /// The longest `transaction.timeout.ms` a producer may ask for; InitProducerId above it
    /// is refused INVALID_TRANSACTION_TIMEOUT (`transaction.max.timeout.ms`, 15 minutes).
    #[arg(long, env = "KAAS_TRANSACTION_MAX_TIMEOUT_MS", default_value_t = 900_000,
          value_parser = clap::value_parser!(i32).range(1..))]
    pub transaction_max_timeout_ms: i32,
    /// How long a transactional id may stay idle (no transaction) before its coordinator
    /// forgets it (`transactional.id.expiration.ms`, 7 days).
    #[arg(long, env = "KAAS_TRANSACTIONAL_ID_EXPIRATION_MS", default_value_t = 604_800_000,
          value_parser = clap::value_parser!(i64).range(1..))]
    pub transactional_id_expiration_ms: i64,
    /// How often coordinators abort transactions open past their timeout
    /// (`transaction.abort.timed.out.transaction.cleanup.interval.ms`, 10 seconds).
    #[arg(long, env = "KAAS_TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS",
          default_value_t = 10_000, value_parser = clap::value_parser!(i64).range(1..))]
    pub transaction_abort_timed_out_transaction_cleanup_interval_ms: i64,
    /// How often coordinators look for expired transactional ids
    /// (`transaction.remove.expired.transaction.cleanup.interval.ms`, 1 hour).
    #[arg(long, env = "KAAS_TRANSACTION_REMOVE_EXPIRED_TRANSACTION_CLEANUP_INTERVAL_MS",
          default_value_t = 3_600_000, value_parser = clap::value_parser!(i64).range(1..))]
    pub transaction_remove_expired_transaction_cleanup_interval_ms: i64,
}

impl TransactionFlags {
    /// The coordinators' settings these flags mean.
    pub fn coordinator_config(&self) -> CoordinatorConfig {
        CoordinatorConfig {
            transaction_max_timeout_ms: self.transaction_max_timeout_ms,
            transactional_id_expiration_ms: self.transactional_id_expiration_ms,
            abort_timed_out_transactions_interval_ms: self
                .transaction_abort_timed_out_transaction_cleanup_interval_ms,
            remove_expired_transactional_ids_interval_ms: self
                .transaction_remove_expired_transaction_cleanup_interval_ms,
            ..CoordinatorConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Only {
        #[command(flatten)]
        transactions: TransactionFlags,
    }

    fn parse(args: &[&str]) -> Result<CoordinatorConfig, clap::Error> {
        let mut all = vec!["kaas"];
        all.extend_from_slice(args);
        Only::try_parse_from(all).map(|only| only.transactions.coordinator_config())
    }

    #[test]
    fn defaults_are_kafkas() {
        assert_eq!(parse(&[]).expect("defaults"), CoordinatorConfig::default());
    }

    #[test]
    fn flags_set_the_coordinators_settings() {
        let config = parse(&[
            "--transaction-max-timeout-ms",
            "60000",
            "--transaction-abort-timed-out-transaction-cleanup-interval-ms",
            "500",
        ])
        .expect("valid");
        assert_eq!(config.transaction_max_timeout_ms, 60_000);
        assert_eq!(config.abort_timed_out_transactions_interval_ms, 500);
        assert!(parse(&["--transaction-max-timeout-ms", "0"]).is_err());
    }
}
