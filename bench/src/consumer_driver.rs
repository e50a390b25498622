//! Consumer threads: end-to-end latency under load, and full passes over a filled topic.
//!
//! Consumers are assigned partitions directly (no group membership), each thread a share of
//! the topic's partitions. End-to-end latency is receive time minus the intended send time
//! stamped in the first 8 bytes of the value by the producer (same process, same monotonic
//! clock), so it includes the producer's queueing and is free of coordinated omission too.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

use crate::latency_recorder::SampleRecorder;
use crate::payload::read_timestamp;
use crate::producer_driver::ClientErrors;
use crate::progress_probe::ProgressProbe;
use crate::sample_clock::SampleClock;

struct ConsumerProbe {
    client_errors: Arc<ClientErrors>,
}

impl ClientContext for ConsumerProbe {
    fn error(&self, error: KafkaError, reason: &str) {
        self.client_errors.add(format!("{error}: {reason}"));
    }
}

impl ConsumerContext for ConsumerProbe {}

/// The partitions `index` of `count` consumers reads: every `count`-th partition.
pub fn share_of(partitions: i32, index: usize, count: usize) -> Vec<i32> {
    (0..partitions)
        .filter(|partition| *partition as usize % count.max(1) == index)
        .collect()
}

fn assigned_consumer(
    config: &ClientConfig,
    topic: &str,
    start: &[(i32, Offset)],
    client_errors: Arc<ClientErrors>,
) -> anyhow::Result<BaseConsumer<ConsumerProbe>> {
    let consumer: BaseConsumer<ConsumerProbe> = config
        .create_with_context(ConsumerProbe { client_errors })
        .context("creating a consumer")?;
    let mut assignment = TopicPartitionList::new();
    for (partition, offset) in start {
        assignment
            .add_partition_offset(topic, *partition, *offset)
            .context("building the assignment")?;
    }
    consumer
        .assign(&assignment)
        .context("assigning partitions")?;
    Ok(consumer)
}

/// What an end-to-end consumer measured.
pub struct EndToEndOutcome {
    pub recorder: SampleRecorder,
    pub received: u64,
    pub errors: Vec<String>,
    pub client_errors: (u64, Vec<String>),
}

/// Reads `start`'s partitions, recording end-to-end latency, until `stop` is set.
pub fn run_end_to_end_consumer(
    config: &ClientConfig,
    topic: &str,
    start: &[(i32, Offset)],
    clock: SampleClock,
    progress: Arc<ProgressProbe>,
    ready: &AtomicBool,
    stop: &AtomicBool,
) -> anyhow::Result<EndToEndOutcome> {
    let client_errors = Arc::new(ClientErrors::default());
    let consumer = assigned_consumer(config, topic, start, client_errors.clone())?;
    ready.store(true, Ordering::Release);
    let mut recorder = SampleRecorder::new(clock.samples);
    let mut received = 0u64;
    let mut errors = Vec::new();
    while !stop.load(Ordering::Acquire) {
        match consumer.poll(Duration::from_millis(50)) {
            Some(Ok(message)) => {
                let now = Instant::now();
                let value = message.payload().unwrap_or_default();
                let bytes = (value.len() + message.key().map_or(0, <[u8]>::len)) as u64;
                if let Some(sent_nanos) = read_timestamp(value) {
                    let sent = clock.at_nanos(sent_nanos);
                    let latency_us = now.saturating_duration_since(sent).as_micros() as u64;
                    recorder.record_latency(clock.phase_of(sent), latency_us);
                    progress.observe_latency(latency_us);
                }
                recorder.count(clock.phase_of(now), bytes);
                received += 1;
                progress.add_consumed(bytes);
            }
            Some(Err(error)) => {
                progress.add_error();
                if errors.len() < 10 {
                    errors.push(error.to_string());
                }
            }
            None => {}
        }
    }
    Ok(EndToEndOutcome {
        recorder,
        received,
        errors,
        client_errors: client_errors.snapshot(),
    })
}

/// What one consumer read in one pass.
pub struct PassOutcome {
    pub records: u64,
    pub bytes: u64,
    /// When the first record arrived (`None` when none did).
    pub first: Option<Instant>,
    /// When the last record arrived (or the pass gave up).
    pub finished: Instant,
    pub complete: bool,
    pub errors: Vec<String>,
    pub client_errors: (u64, Vec<String>),
}

/// Reads `start`'s partitions until `expected` records arrived or `deadline` passed.
pub fn run_pass_consumer(
    config: &ClientConfig,
    topic: &str,
    start: &[(i32, Offset)],
    expected: u64,
    deadline: Instant,
    progress: Arc<ProgressProbe>,
) -> anyhow::Result<PassOutcome> {
    let client_errors = Arc::new(ClientErrors::default());
    let consumer = assigned_consumer(config, topic, start, client_errors.clone())?;
    let mut records = 0u64;
    let mut bytes = 0u64;
    let mut errors = Vec::new();
    let mut first = None;
    let mut finished = Instant::now();
    while records < expected && Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(50)) {
            Some(Ok(message)) => {
                let size = message.payload_len() + message.key().map_or(0, <[u8]>::len);
                first.get_or_insert_with(Instant::now);
                records += 1;
                bytes += size as u64;
                progress.add_consumed(size as u64);
                finished = Instant::now();
            }
            Some(Err(error)) => {
                progress.add_error();
                if errors.len() < 10 {
                    errors.push(error.to_string());
                }
            }
            None => {}
        }
    }
    if records < expected {
        finished = Instant::now();
    }
    Ok(PassOutcome {
        records,
        bytes,
        first,
        finished,
        complete: records >= expected,
        errors,
        client_errors: client_errors.snapshot(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_every_partition_once() {
        let shares: Vec<Vec<i32>> = (0..3).map(|index| share_of(7, index, 3)).collect();
        assert_eq!(shares[0], vec![0, 3, 6]);
        assert_eq!(shares[1], vec![1, 4]);
        assert_eq!(shares[2], vec![2, 5]);
        assert_eq!(share_of(2, 0, 1), vec![0, 1]);
    }
}
