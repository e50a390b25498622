//! Logging a failure that repeats every few seconds (an API server that is down, an RBAC
//! rule that is missing) without drowning the log: a new message is logged at once, the same
//! message again only after [`REPEAT_EVERY`], and the first success after failures says the
//! adapter reached the API server again.

use std::time::{Duration, Instant};

/// How often an unchanged failure is logged again.
pub const REPEAT_EVERY: Duration = Duration::from_secs(30);

/// The failures of one adapter.
#[derive(Debug)]
pub struct ErrorLog {
    what: &'static str,
    last: Option<(String, Instant)>,
}

impl ErrorLog {
    /// The log of the adapter `what` (`"controller Lease"`, ...).
    pub fn new(what: &'static str) -> Self {
        ErrorLog { what, last: None }
    }

    /// Logs `error` unless the same text was logged less than [`REPEAT_EVERY`] ago.
    pub fn failed(&mut self, error: &dyn std::fmt::Display) {
        let text = error.to_string();
        let now = Instant::now();
        let repeat = matches!(&self.last, Some((last, at)) if *last == text && now.duration_since(*at) < REPEAT_EVERY);
        if !repeat {
            tracing::error!(adapter = self.what, error = %text, "Kubernetes request failed; retrying");
            self.last = Some((text, now));
        }
    }

    /// A request went through; says so once after failures.
    pub fn succeeded(&mut self) {
        if self.last.take().is_some() {
            tracing::info!(adapter = self.what, "Kubernetes requests go through again");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_failure_is_remembered_until_a_success() {
        let mut log = ErrorLog::new("test");
        log.failed(&"cannot get leases");
        let first = log.last.clone();
        log.failed(&"cannot get leases");
        assert_eq!(
            log.last, first,
            "the same failure is not logged again at once"
        );
        log.failed(&"cannot update leases");
        assert_eq!(
            log.last.as_ref().map(|(text, _)| text.as_str()),
            Some("cannot update leases")
        );
        log.succeeded();
        assert!(log.last.is_none());
    }
}
