//! One consumer group member: a `BaseConsumer` subscribed to a topic, polled by its own
//! thread, whose rebalance callbacks keep an [`AssignmentView`] the main thread reads.
//!
//! Callbacks run on the member's thread inside `poll` (after librdkafka applied the
//! assignment), and are stamped there; `poll` returns as soon as a rebalance event is queued,
//! so the stamp is within microseconds of the client learning its new assignment.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError;
use rdkafka::{ClientConfig, TopicPartitionList};

use crate::group_view::AssignmentView;
use crate::producer_driver::ClientErrors;

/// How long a member waits for the topic's metadata before subscribing.
const METADATA_TIMEOUT: Duration = Duration::from_secs(30);

/// What a member's thread shares with the main thread.
#[derive(Default)]
pub struct MemberShared {
    pub view: Mutex<AssignmentView>,
    /// When `subscribe` was called.
    pub subscribed_at: OnceLock<Instant>,
    pub client_errors: ClientErrors,
    /// Rebalance errors (librdkafka drops the assignment on these).
    pub rebalance_errors: ClientErrors,
}

impl MemberShared {
    /// A copy of the member's current assignment.
    pub fn view(&self) -> AssignmentView {
        self.view
            .lock()
            .map(|view| view.clone())
            .unwrap_or_default()
    }
}

struct RebalanceProbe {
    shared: Arc<MemberShared>,
}

fn partitions_of(list: &TopicPartitionList) -> Vec<i32> {
    list.elements().iter().map(|tp| tp.partition()).collect()
}

impl ClientContext for RebalanceProbe {
    fn error(&self, error: KafkaError, reason: &str) {
        self.shared.client_errors.add(format!("{error}: {reason}"));
    }
}

impl ConsumerContext for RebalanceProbe {
    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let now = Instant::now();
        let Ok(mut view) = self.shared.view.lock() else {
            return;
        };
        match rebalance {
            Rebalance::Assign(list) => view.assign(partitions_of(list), now),
            Rebalance::Revoke(list) => view.revoke(partitions_of(list), now),
            Rebalance::Error(error) => {
                view.clear(now);
                self.shared.rebalance_errors.add(error.to_string());
            }
        }
    }
}

/// A running member.
pub struct GroupMember {
    pub shared: Arc<MemberShared>,
    thread: JoinHandle<anyhow::Result<()>>,
}

impl GroupMember {
    /// Starts a thread that creates a consumer from `config`, fetches `topic`'s metadata
    /// (so the connection to the broker is up and the measurement starts at the group
    /// protocol), subscribes, and polls until `stop` is set; it then closes the consumer,
    /// which leaves the group.
    pub fn start(
        name: String,
        config: ClientConfig,
        topic: String,
        stop: Arc<AtomicBool>,
    ) -> anyhow::Result<GroupMember> {
        let shared = Arc::new(MemberShared::default());
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || run_member(&config, &topic, &thread_shared, &stop))
            .context("starting a member thread")?;
        Ok(GroupMember { shared, thread })
    }

    /// Whether the member's thread has ended (it only does on its own after an error).
    pub fn has_ended(&self) -> bool {
        self.thread.is_finished()
    }

    /// Waits for the thread to close its consumer (set `stop` first).
    pub fn join(self) -> anyhow::Result<()> {
        self.thread
            .join()
            .map_err(|_| anyhow!("a member thread panicked"))?
    }
}

fn run_member(
    config: &ClientConfig,
    topic: &str,
    shared: &Arc<MemberShared>,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    let consumer: BaseConsumer<RebalanceProbe> = config
        .create_with_context(RebalanceProbe {
            shared: shared.clone(),
        })
        .context("creating a group member")?;
    consumer
        .fetch_metadata(Some(topic), METADATA_TIMEOUT)
        .context("fetching the topic's metadata")?;
    let _ = shared.subscribed_at.set(Instant::now());
    consumer.subscribe(&[topic]).context("subscribing")?;
    while !stop.load(Ordering::Acquire) {
        // The topic stays empty: poll only serves rebalance callbacks and errors.
        if let Some(Err(error)) = consumer.poll(Duration::from_millis(50)) {
            shared.client_errors.add(error.to_string());
        }
    }
    // Dropping the consumer closes it: revoke callback, LeaveGroup, then the threads stop.
    drop(consumer);
    Ok(())
}
