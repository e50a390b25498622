//! `group-settle`: how long a consumer group takes to settle after a member joins.
//!
//! On a fresh topic, `--members - 1` consumers subscribe in a fresh group and the run waits
//! until the group is settled (see [`crate::group_view`]); then one more member subscribes,
//! and the sample is the time from its `subscribe` call to the latest rebalance callback of
//! the settled group with every member. A settled state counts once it has held, unchanged,
//! for `--stable-ms` (so a passing state in the middle of a rebalance is not taken for the
//! end); the measurement ends at the callback, not at the end of that wait. Each sample uses
//! a fresh group, and closes its members before the next one starts.
//!
//! Existing members learn of a join from their next heartbeat, so the settle time depends
//! on where in their heartbeat cycle the join falls. The joiner subscribes `--stable-ms` plus
//! a delay after the callback that settled the initial group, and the delays of the samples
//! are spread evenly over `--join-spread-ms` (one heartbeat interval by default): sample *i*
//! of *n* waits `(i + 0.5) / n` of it. Every broker measured with the same settings gets the
//! same phases.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

use crate::client_config::{parse_key_value, ClientSettings};
use crate::group_member::GroupMember;
use crate::group_view::{is_settled, last_change, AssignmentView};
use crate::machine::{git_revision, unix_time, MachineInfo};
use crate::report::median;
use crate::topic_admin::TopicAdmin;

/// Report format identifier, bumped when fields change meaning.
pub const GROUP_SETTLE_FORMAT: &str = "kaas-bench-group-settle/1";

/// Client errors kept in the report's notes.
const NOTES_KEPT: usize = 20;

/// The group membership protocol members use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GroupProtocol {
    /// JoinGroup / SyncGroup / Heartbeat; the client-side assignor of the group's leader.
    Classic,
    /// KIP-848 ConsumerGroupHeartbeat; the broker assigns.
    Consumer,
}

/// Client-side assignors for the classic protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AssignmentStrategy {
    /// Eager: every rebalance revokes every partition first.
    Range,
    /// Incremental: only the partitions that move are revoked, in a second rebalance.
    CooperativeSticky,
}

impl AssignmentStrategy {
    pub fn name(self) -> &'static str {
        match self {
            AssignmentStrategy::Range => "range",
            AssignmentStrategy::CooperativeSticky => "cooperative-sticky",
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct GroupSettleArgs {
    /// Broker address (`bootstrap.servers`).
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// Name of the broker in the report.
    #[arg(long, default_value = "broker")]
    pub target: String,
    /// Members once the last one has joined.
    #[arg(long, default_value_t = 10)]
    pub members: usize,
    /// Partitions of the fresh topic the group subscribes to.
    #[arg(long, default_value_t = 60)]
    pub partitions: i32,
    /// Samples, each with a fresh group.
    #[arg(long, default_value_t = 7)]
    pub samples: usize,
    /// `group.protocol`.
    #[arg(long, value_enum, default_value = "classic")]
    pub group_protocol: GroupProtocol,
    /// `partition.assignment.strategy` (classic protocol only; default range).
    #[arg(long, value_enum)]
    pub assignment_strategy: Option<AssignmentStrategy>,
    /// `group.remote.assignor`, e.g. uniform or range (consumer protocol only; default: the
    /// broker's).
    #[arg(long)]
    pub remote_assignor: Option<String>,
    /// `session.timeout.ms` (classic protocol only; default 10000).
    #[arg(long)]
    pub session_timeout_ms: Option<u32>,
    /// `heartbeat.interval.ms` (classic protocol only; default 1000).
    #[arg(long)]
    pub heartbeat_interval_ms: Option<u32>,
    /// How long a settled state must hold unchanged to count as the end of a rebalance.
    #[arg(long, default_value_t = 500)]
    pub stable_ms: u64,
    /// The joiner's extra delays after the initial group settled are spread evenly over this
    /// many milliseconds (default: one heartbeat interval, 1000).
    #[arg(long, default_value_t = 1_000)]
    pub join_spread_ms: u64,
    /// Seconds a group may take to settle before the sample fails.
    #[arg(long, default_value_t = 60)]
    pub sample_timeout: u64,
    /// Consumer property, `key=value` (repeatable; applied last).
    #[arg(long = "consumer-prop", value_parser = parse_key_value)]
    pub consumer_props: Vec<(String, String)>,
    /// Write the JSON report here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Everything that defines a measurement (recorded verbatim in the report).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GroupSettleSettings {
    pub members: usize,
    pub partitions: i32,
    pub samples: usize,
    pub group_protocol: GroupProtocol,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub assignment_strategy: Option<AssignmentStrategy>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub remote_assignor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub session_timeout_ms: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub heartbeat_interval_ms: Option<u32>,
    pub stable_ms: u64,
    pub join_spread_ms: u64,
    pub sample_timeout_s: u64,
    /// Every group setting the members were created with, overrides included.
    pub client_props: Vec<(String, String)>,
}

impl GroupSettleSettings {
    fn from_args(args: &GroupSettleArgs) -> anyhow::Result<Self> {
        ensure!(args.members >= 2, "--members must be at least 2");
        ensure!(
            args.partitions >= args.members as i32,
            "--partitions must be at least --members, or some member stays idle"
        );
        ensure!(args.samples >= 1, "--samples must be at least 1");
        let mut settings = GroupSettleSettings {
            members: args.members,
            partitions: args.partitions,
            samples: args.samples,
            group_protocol: args.group_protocol,
            assignment_strategy: None,
            remote_assignor: None,
            session_timeout_ms: None,
            heartbeat_interval_ms: None,
            stable_ms: args.stable_ms,
            join_spread_ms: args.join_spread_ms,
            sample_timeout_s: args.sample_timeout,
            client_props: Vec::new(),
        };
        let mut props = Vec::new();
        match args.group_protocol {
            GroupProtocol::Classic => {
                ensure!(
                    args.remote_assignor.is_none(),
                    "--remote-assignor needs --group-protocol consumer"
                );
                let strategy = args
                    .assignment_strategy
                    .unwrap_or(AssignmentStrategy::Range);
                let session = args.session_timeout_ms.unwrap_or(10_000);
                let heartbeat = args.heartbeat_interval_ms.unwrap_or(1_000);
                props.push(("group.protocol", "classic".to_string()));
                props.push(("partition.assignment.strategy", strategy.name().into()));
                props.push(("session.timeout.ms", session.to_string()));
                props.push(("heartbeat.interval.ms", heartbeat.to_string()));
                settings.assignment_strategy = Some(strategy);
                settings.session_timeout_ms = Some(session);
                settings.heartbeat_interval_ms = Some(heartbeat);
            }
            GroupProtocol::Consumer => {
                // librdkafka refuses these with group.protocol=consumer: the broker sets them.
                ensure!(
                    args.assignment_strategy.is_none()
                        && args.session_timeout_ms.is_none()
                        && args.heartbeat_interval_ms.is_none(),
                    "--assignment-strategy, --session-timeout-ms and --heartbeat-interval-ms \
                     are classic-protocol settings; the consumer protocol takes \
                     --remote-assignor, and its timeouts from the broker"
                );
                props.push(("group.protocol", "consumer".to_string()));
                if let Some(assignor) = &args.remote_assignor {
                    props.push(("group.remote.assignor", assignor.clone()));
                }
                settings.remote_assignor = args.remote_assignor.clone();
            }
        }
        settings.client_props = props
            .into_iter()
            .map(|(key, value)| (key.to_string(), value))
            .chain(args.consumer_props.iter().cloned())
            .collect();
        Ok(settings)
    }

    /// `classic/range`, `consumer/uniform`, ...
    pub fn label(&self) -> String {
        let assignor = match (&self.assignment_strategy, &self.remote_assignor) {
            (Some(strategy), _) => strategy.name(),
            (None, Some(assignor)) => assignor.as_str(),
            (None, None) => "broker-default",
        };
        let protocol = match self.group_protocol {
            GroupProtocol::Classic => "classic",
            GroupProtocol::Consumer => "consumer",
        };
        format!("{protocol}/{assignor}")
    }
}

/// One join: the group had `members - 1` members, then one more subscribed.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SettleSample {
    pub index: usize,
    pub group_id: String,
    /// How long after the initial group settled (beyond `stable_ms`) the joiner started.
    pub join_delay_ms: f64,
    /// From the first of the initial members' `subscribe` to their group being settled.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub initial_settle_ms: Option<f64>,
    /// From the joining member's `subscribe` to the group being settled again.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub settle_ms: Option<f64>,
    /// Rebalance callbacks all members served between the join and the settled state.
    pub rebalance_callbacks: u32,
    /// Partitions per member once settled, in member start order (the joiner last).
    pub assignment_sizes: Vec<usize>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
}

/// Median, min and max of the samples that settled.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SettleSummary {
    pub settled_samples: usize,
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
}

/// Everything `group-settle` writes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GroupSettleReport {
    pub format: String,
    pub target: String,
    pub bootstrap: String,
    pub started_at_unix: u64,
    pub git_revision: String,
    pub machine: MachineInfo,
    pub settings: GroupSettleSettings,
    pub topic: String,
    pub samples: Vec<SettleSample>,
    pub summary: SettleSummary,
    /// False when a sample did not settle.
    pub complete: bool,
    pub errors: Vec<String>,
    /// Client errors librdkafka reported (usually transient, e.g. on close).
    pub notes: Vec<String>,
}

/// Median, min and max of `settle_ms` over the samples that have one.
pub fn summarize(samples: &[SettleSample]) -> SettleSummary {
    let times: Vec<f64> = samples.iter().filter_map(|s| s.settle_ms).collect();
    if times.is_empty() {
        return SettleSummary::default();
    }
    SettleSummary {
        settled_samples: times.len(),
        median_ms: median(&times),
        min_ms: times.iter().copied().fold(f64::INFINITY, f64::min),
        max_ms: times.iter().copied().fold(0.0, f64::max),
    }
}

pub fn group_settle_command(args: &GroupSettleArgs) -> anyhow::Result<()> {
    let settings = GroupSettleSettings::from_args(args)?;
    let report = measure(args, settings)?;
    print_report(&report);
    if let Some(path) = &args.json {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if !report.complete {
        bail!("not every sample settled; see the errors above");
    }
    Ok(())
}

fn measure(
    args: &GroupSettleArgs,
    settings: GroupSettleSettings,
) -> anyhow::Result<GroupSettleReport> {
    let client_settings = ClientSettings {
        bootstrap: args.bootstrap.clone(),
        acks: "all".into(),
        compression: "none".into(),
        producer_props: Vec::new(),
        consumer_props: Vec::new(),
    };
    let admin = TopicAdmin::connect(&client_settings)?;
    let started_at_unix = unix_time();
    let run_id = format!("{:016x}", rand::random::<u64>());
    let topic = format!("kaas-bench-settle-{run_id}");
    admin.create(&topic, settings.partitions, &[])?;
    let mut samples = Vec::new();
    let mut notes = Vec::new();
    for index in 0..settings.samples {
        let group_id = format!("kaas-bench-settle-{run_id}-{index}");
        let (sample, client_errors) =
            run_sample(&client_settings, &settings, &topic, index, group_id);
        match sample.settle_ms {
            Some(ms) => eprintln!("[group-settle] sample {index}: {ms:.1} ms"),
            None => eprintln!("[group-settle] sample {index}: did not settle"),
        }
        let room = NOTES_KEPT.saturating_sub(notes.len());
        notes.extend(client_errors.into_iter().take(room));
        samples.push(sample);
    }
    if let Err(error) = admin.delete(&topic) {
        notes.push(format!("deleting {topic}: {error:#}"));
    }
    let errors: Vec<String> = samples
        .iter()
        .filter_map(|s| s.error.as_ref().map(|e| format!("sample {}: {e}", s.index)))
        .collect();
    Ok(GroupSettleReport {
        format: GROUP_SETTLE_FORMAT.into(),
        target: args.target.clone(),
        bootstrap: args.bootstrap.clone(),
        started_at_unix,
        git_revision: git_revision(),
        machine: MachineInfo::current(),
        summary: summarize(&samples),
        complete: errors.is_empty(),
        settings,
        topic,
        samples,
        errors,
        notes,
    })
}

struct Measured {
    initial_settle_ms: f64,
    settle_ms: f64,
    rebalance_callbacks: u32,
    assignment_sizes: Vec<usize>,
}

/// One sample; members are always closed before it returns. Also returns the members'
/// client errors.
fn run_sample(
    client_settings: &ClientSettings,
    settings: &GroupSettleSettings,
    topic: &str,
    index: usize,
    group_id: String,
) -> (SettleSample, Vec<String>) {
    let stop = Arc::new(AtomicBool::new(false));
    let mut members = Vec::new();
    let delay = join_delay(settings, index);
    let outcome = join_one(
        client_settings,
        settings,
        topic,
        &group_id,
        delay,
        &stop,
        &mut members,
    );
    stop.store(true, Ordering::Release);
    let mut client_errors = Vec::new();
    for member in members {
        let shared = member.shared.clone();
        if let Err(error) = member.join() {
            client_errors.push(format!("closing a member: {error:#}"));
        }
        let (_, messages) = shared.client_errors.snapshot();
        let (_, rebalance_errors) = shared.rebalance_errors.snapshot();
        client_errors.extend(messages);
        client_errors.extend(
            rebalance_errors
                .into_iter()
                .map(|e| format!("rebalance: {e}")),
        );
    }
    let mut sample = SettleSample {
        index,
        group_id,
        join_delay_ms: millis(delay),
        initial_settle_ms: None,
        settle_ms: None,
        rebalance_callbacks: 0,
        assignment_sizes: Vec::new(),
        error: None,
    };
    match outcome {
        Ok(measured) => {
            sample.initial_settle_ms = Some(measured.initial_settle_ms);
            sample.settle_ms = Some(measured.settle_ms);
            sample.rebalance_callbacks = measured.rebalance_callbacks;
            sample.assignment_sizes = measured.assignment_sizes;
        }
        Err(error) => sample.error = Some(format!("{error:#}")),
    }
    (sample, client_errors)
}

fn join_one(
    client_settings: &ClientSettings,
    settings: &GroupSettleSettings,
    topic: &str,
    group_id: &str,
    join_delay: Duration,
    stop: &Arc<AtomicBool>,
    members: &mut Vec<GroupMember>,
) -> anyhow::Result<Measured> {
    let start_member = |number: usize| {
        let name = format!("member-{number}");
        let config = client_settings.group_member(
            &format!("kaas-bench-{name}"),
            group_id,
            &settings.client_props,
        );
        GroupMember::start(name, config, topic.to_string(), stop.clone())
    };
    let stable = Duration::from_millis(settings.stable_ms);
    let timeout = Duration::from_secs(settings.sample_timeout_s);
    for number in 0..settings.members - 1 {
        members.push(start_member(number)?);
    }
    let initial_at = wait_settled(members, settings.partitions, stable, timeout)
        .context("the initial members did not settle")?;
    let first_subscribe = members
        .iter()
        .filter_map(|member| member.shared.subscribed_at.get().copied())
        .min()
        .context("no member subscribed")?;
    let callbacks_before: u32 = views(members).iter().map(|view| view.callbacks).sum();
    let join_at = initial_at + stable + join_delay;
    std::thread::sleep(join_at.saturating_duration_since(Instant::now()));

    members.push(start_member(settings.members - 1)?);
    let settled_at = wait_settled(members, settings.partitions, stable, timeout)
        .context("the group did not settle after the join")?;
    let joined_at = members
        .last()
        .and_then(|member| member.shared.subscribed_at.get().copied())
        .context("the joining member never subscribed")?;
    let final_views = views(members);
    let callbacks_after: u32 = final_views.iter().map(|view| view.callbacks).sum();
    Ok(Measured {
        initial_settle_ms: millis(initial_at.saturating_duration_since(first_subscribe)),
        settle_ms: millis(settled_at.saturating_duration_since(joined_at)),
        rebalance_callbacks: callbacks_after - callbacks_before,
        assignment_sizes: final_views.iter().map(|v| v.partitions.len()).collect(),
    })
}

/// Sample `index`'s delay: the middle of its equal slice of `join_spread_ms`.
fn join_delay(settings: &GroupSettleSettings, index: usize) -> Duration {
    let slice = settings.join_spread_ms as f64 / settings.samples.max(1) as f64;
    Duration::from_secs_f64((index as f64 + 0.5) * slice / 1000.0)
}

fn views(members: &[GroupMember]) -> Vec<AssignmentView> {
    members.iter().map(|member| member.shared.view()).collect()
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// Waits until `members` are settled and have stayed so for `stable`; returns the time of
/// the rebalance callback that settled them.
fn wait_settled(
    members: &[GroupMember],
    partitions: i32,
    stable: Duration,
    timeout: Duration,
) -> anyhow::Result<Instant> {
    let deadline = Instant::now() + timeout;
    loop {
        if members.iter().any(GroupMember::has_ended) {
            bail!("a member stopped (it could not be created or subscribe)");
        }
        let current = views(members);
        let now = Instant::now();
        if is_settled(&current, partitions) {
            if let Some(at) = last_change(&current) {
                if now.saturating_duration_since(at) >= stable {
                    return Ok(at);
                }
            }
        }
        if now >= deadline {
            let sizes: Vec<usize> = current.iter().map(|v| v.partitions.len()).collect();
            bail!("not settled after {timeout:?}; partitions per member: {sizes:?}");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn print_report(report: &GroupSettleReport) {
    let settings = &report.settings;
    let summary = &report.summary;
    println!(
        "{}: {} members, {} partitions, {}: one member joining settles in median {:.1} ms \
         (min {:.1}, max {:.1}) over {} of {} samples",
        report.target,
        settings.members,
        settings.partitions,
        settings.label(),
        summary.median_ms,
        summary.min_ms,
        summary.max_ms,
        summary.settled_samples,
        report.samples.len()
    );
    let times: Vec<String> = report
        .samples
        .iter()
        .map(|s| s.settle_ms.map_or("-".into(), |ms| format!("{ms:.1}")))
        .collect();
    println!("  samples (ms): {}", times.join(" "));
    for error in &report.errors {
        println!("  error: {error}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct TestCli {
        #[command(flatten)]
        args: GroupSettleArgs,
    }

    fn sample(index: usize, settle_ms: Option<f64>) -> SettleSample {
        SettleSample {
            index,
            group_id: String::new(),
            join_delay_ms: 0.0,
            initial_settle_ms: None,
            settle_ms,
            rebalance_callbacks: 0,
            assignment_sizes: Vec::new(),
            error: None,
        }
    }

    #[test]
    fn summaries_skip_samples_that_did_not_settle() {
        let samples = [
            sample(0, Some(30.0)),
            sample(1, None),
            sample(2, Some(10.0)),
            sample(3, Some(20.0)),
        ];
        let summary = summarize(&samples);
        assert_eq!(summary.settled_samples, 3);
        assert_eq!(summary.median_ms, 20.0);
        assert_eq!(summary.min_ms, 10.0);
        assert_eq!(summary.max_ms, 30.0);
        assert_eq!(summarize(&[]).settled_samples, 0);
    }

    #[test]
    fn join_delays_spread_evenly_over_the_interval() {
        let args = TestCli::parse_from(["group-settle", "--samples", "4"]).args;
        let settings = GroupSettleSettings::from_args(&args).unwrap_or_else(|e| panic!("{e}"));
        let delays: Vec<u128> = (0..4)
            .map(|index| join_delay(&settings, index).as_millis())
            .collect();
        assert_eq!(delays, vec![125, 375, 625, 875]);
    }
}
