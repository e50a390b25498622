//! The way from a broker's shard 0 to whoever serves its topic changes: a runtime-agnostic
//! channel of [`TopicChangeRequest`]s, and a oneshot per request for the answer, awaited on
//! the glommio shard. A standalone broker serves the receiving end itself, on shard 0
//! ([`crate::topics::local_controller`]); in cluster mode the cluster core takes it and
//! serves it on its tokio runtime (`Broker::serve_topic_changes`).
//!
//! Nothing serves topic changes until the receiving end is taken: in cluster mode with
//! `--assignment-source file` it never is, and every change is refused at once with a
//! message saying where topics come from then. An answer that does not come within the
//! bound (the core is stuck) is REQUEST_TIMED_OUT; a request dropped unanswered (the core
//! stopped) is UNKNOWN_SERVER_ERROR. Neither ever hangs a request.

use std::sync::OnceLock;
use std::time::Duration;

use futures_lite::future;
use kaas_cluster::topic_change::{TopicChange, TopicChangeRefusal, TopicChangeRequest};

use crate::protocol::ErrorCode;
use crate::topics::checks::TopicError;

/// How long a broker waits for the KafkaTopic service's answer.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// The sending end, shared by the broker (which hands the receiving end out once) and shard 0.
#[derive(Debug, Default)]
pub struct TopicChangeLink {
    sender: OnceLock<async_channel::Sender<TopicChangeRequest>>,
}

impl TopicChangeLink {
    /// A link nothing serves yet.
    pub fn new() -> Self {
        TopicChangeLink::default()
    }

    /// The receiving end, the first time only: from then on changes are sent to it.
    pub fn serve(&self) -> Option<async_channel::Receiver<TopicChangeRequest>> {
        let (sender, receiver) = async_channel::unbounded();
        self.sender.set(sender).ok()?;
        Some(receiver)
    }

    /// Whether something serves topic changes.
    pub fn is_served(&self) -> bool {
        self.sender.get().is_some()
    }

    /// Sends `change` and waits (at most `timeout`) for its answer.
    pub async fn send(&self, change: TopicChange, timeout: Duration) -> Result<(), TopicError> {
        let Some(sender) = self.sender.get() else {
            return Err(not_served());
        };
        let (answer, answered) = futures_channel::oneshot::channel();
        let request = TopicChangeRequest::new(change, move |outcome| {
            let _ = answer.send(outcome);
        });
        if sender.try_send(request).is_err() {
            return Err(TopicError::new(
                ErrorCode::UnknownServerError,
                "whoever serves topic changes (the cluster core, or a standalone broker's controller) is not running",
            ));
        }
        let outcome = future::or(async { Some(answered.await) }, async {
            glommio::timer::sleep(timeout).await;
            None
        })
        .await;
        match outcome {
            Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(refusal))) => Err(refusal_error(refusal)),
            Some(Err(_canceled)) => Err(TopicError::new(
                ErrorCode::UnknownServerError,
                "the topic change was dropped unanswered: whoever serves topic changes stopped",
            )),
            None => Err(TopicError::new(
                ErrorCode::RequestTimedOut,
                format!(
                    "no answer to the topic change within {} s; it may still be made",
                    timeout.as_secs()
                ),
            )),
        }
    }
}

/// The refusal of a topic change when nothing serves them (`--assignment-source file`).
pub fn not_served() -> TopicError {
    TopicError::new(
        ErrorCode::InvalidRequest,
        "topics are managed by the cluster assignment (assignment.json) in cluster mode with \
         --assignment-source file; with --assignment-source kube they are KafkaTopic resources \
         that topic changes create, patch and delete",
    )
}

/// The Kafka error of a refusal; a code kaas does not know is UNKNOWN_SERVER_ERROR.
pub fn refusal_error(refusal: TopicChangeRefusal) -> TopicError {
    TopicError::new(
        ErrorCode::from_code(refusal.code).unwrap_or(ErrorCode::UnknownServerError),
        refusal.message,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kaas_cluster::topic_change::codes;

    #[test]
    fn the_receiving_end_is_handed_out_once() {
        let link = TopicChangeLink::new();
        assert!(!link.is_served());
        assert!(link.serve().is_some());
        assert!(link.is_served());
        assert!(link.serve().is_none());
    }

    #[test]
    fn refusals_keep_their_code_and_message() {
        let error = refusal_error(TopicChangeRefusal::new(
            codes::TOPIC_ALREADY_EXISTS,
            "Topic 'a' already exists.",
        ));
        assert_eq!(error.code, ErrorCode::TopicAlreadyExists);
        assert_eq!(error.message, "Topic 'a' already exists.");
        assert_eq!(
            refusal_error(TopicChangeRefusal::new(12345, "?")).code,
            ErrorCode::UnknownServerError
        );
        for code in [
            codes::UNKNOWN_SERVER_ERROR,
            codes::UNKNOWN_TOPIC_OR_PARTITION,
            codes::REQUEST_TIMED_OUT,
            codes::INVALID_PARTITIONS,
            codes::INVALID_CONFIG,
        ] {
            assert_eq!(
                refusal_error(TopicChangeRefusal::new(code, "")).code.code(),
                code
            );
        }
    }
}
