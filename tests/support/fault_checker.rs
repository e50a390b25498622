//! The checker of a fault-injection run (tests/cluster_fault_schedule.rs): pure functions from
//! what the clients logged, what the whole log holds afterwards and when each fault was
//! injected, to a report of anomalies by Jepsen's names.
//!
//! Inputs, one event a line (the clients in tests/clients/python/fault_clients.py and
//! tests/clients/go/faults write them; any other line is ignored), times in wall-clock
//! milliseconds of the one machine:
//!
//! ```text
//! ACK <ms> <producer> <seq> <partition> <offset>       a record acknowledged
//! NACK <ms> <producer> <seq> <partition> <error...>    a record the producer gave up on
//! POLL <ms> <group> <member> <partition> <offset> <value>  a record a group member received
//! COMMIT <ms> <group> <member> <partition> <offset>    an offset commit that succeeded
//! LOG <partition> <offset> <value>                     the final log, read from the start
//! COMMITTED <group> <partition> <offset>               a group's committed offset at the end
//! ```
//!
//! A record's value is `<producer>-<seq>`, `seq` counting the producer's sends from 0, so a
//! value names one send and the order of a producer's sends is the order of their `seq`.
//!
//! What is reported:
//! - **lost writes**: acknowledged, not anywhere in the final log;
//! - **duplicates**: one value at more than one place in the final log;
//! - **inconsistent offsets**: an acknowledgement or a poll naming an offset at which the
//!   final log holds another value (or nothing);
//! - **non-monotonic sends**: two records of one producer in one partition whose offsets are
//!   in the opposite order of their sends;
//! - **committed but unread**: a group committed offset `X` of a partition (or holds it at
//!   the end) while some record below `X` had not been polled by any member of the group by
//!   then, or `X` is past the end of the final log;
//! - **unavailability windows**: per partition, the gaps between consecutive
//!   acknowledgements (all producers together) of at least a threshold, each with the faults
//!   whose time overlaps it; per partition its longest gap; per fault the longest gap of any
//!   partition overlapping it, and per fault kind their median and maximum.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

/// A record acknowledged to its producer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ack {
    pub time_ms: u64,
    pub producer: String,
    pub seq: u64,
    pub partition: i32,
    pub offset: i64,
}

impl Ack {
    pub fn value(&self) -> String {
        record_value(&self.producer, self.seq)
    }
}

/// A record its producer gave up on (its fate is unknown: it may or may not be in the log).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendFailure {
    pub time_ms: u64,
    pub producer: String,
    pub seq: u64,
    pub partition: i32,
    pub error: String,
}

/// A record a member of a consumer group received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Poll {
    pub time_ms: u64,
    pub group: String,
    pub member: String,
    pub partition: i32,
    pub offset: i64,
    pub value: String,
}

/// An offset commit the coordinator accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Commit {
    pub time_ms: u64,
    pub group: String,
    pub member: String,
    pub partition: i32,
    pub offset: i64,
}

/// One fault of the schedule: injected at `start_ms`, undone at `end_ms`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The kind, e.g. `kill9`, `pause-controller`, `not-ready`, `api-cut`.
    pub kind: String,
    /// What it hit, e.g. `kaas-1`.
    pub target: String,
    pub start_ms: u64,
    pub end_ms: u64,
}

impl Fault {
    pub fn name(&self) -> String {
        format!("{} {}", self.kind, self.target)
    }
}

/// Everything the checker looks at.
#[derive(Clone, Debug, Default)]
pub struct History {
    pub acks: Vec<Ack>,
    pub send_failures: Vec<SendFailure>,
    pub polls: Vec<Poll>,
    pub commits: Vec<Commit>,
    /// Partition → (offset, value) in offset order.
    pub log: BTreeMap<i32, Vec<(i64, String)>>,
    /// (group, partition) → the group's committed offset at the end.
    pub final_commits: BTreeMap<(String, i32), i64>,
    pub faults: Vec<Fault>,
}

/// `<producer>-<seq>`.
pub fn record_value(producer: &str, seq: u64) -> String {
    format!("{producer}-{seq}")
}

/// (producer, seq) of a value of the form `<producer>-<seq>`.
pub fn parse_value(value: &str) -> Option<(&str, u64)> {
    let (producer, seq) = value.rsplit_once('-')?;
    Some((producer, seq.parse().ok()?))
}

/// A line that looked like an event but did not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadLine(pub String);

impl History {
    /// Adds every event line of `text` (a client's log or the final log's dump); other lines
    /// (a client's PASS, its diagnostics) are skipped. A malformed event line is an error.
    pub fn add_lines(&mut self, text: &str) -> Result<(), BadLine> {
        for line in text.lines() {
            self.add_line(line)
                .ok_or_else(|| BadLine(line.to_string()))?;
        }
        Ok(())
    }

    fn add_line(&mut self, line: &str) -> Option<()> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let int = |i: usize| fields.get(i).and_then(|f| f.parse::<i64>().ok());
        let uint = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
        let text = |i: usize| fields.get(i).map(|f| f.to_string());
        match fields.first().copied() {
            Some("ACK") => self.acks.push(Ack {
                time_ms: uint(1)?,
                producer: text(2)?,
                seq: uint(3)?,
                partition: i32::try_from(int(4)?).ok()?,
                offset: int(5)?,
            }),
            Some("NACK") => self.send_failures.push(SendFailure {
                time_ms: uint(1)?,
                producer: text(2)?,
                seq: uint(3)?,
                partition: i32::try_from(int(4)?).ok()?,
                error: fields
                    .get(5..)
                    .map(|rest| rest.join(" "))
                    .unwrap_or_default(),
            }),
            Some("POLL") => self.polls.push(Poll {
                time_ms: uint(1)?,
                group: text(2)?,
                member: text(3)?,
                partition: i32::try_from(int(4)?).ok()?,
                offset: int(5)?,
                value: text(6)?,
            }),
            Some("COMMIT") => self.commits.push(Commit {
                time_ms: uint(1)?,
                group: text(2)?,
                member: text(3)?,
                partition: i32::try_from(int(4)?).ok()?,
                offset: int(5)?,
            }),
            Some("LOG") => self
                .log
                .entry(i32::try_from(int(1)?).ok()?)
                .or_default()
                .push((int(2)?, text(3)?)),
            Some("COMMITTED") => {
                self.final_commits
                    .insert((text(1)?, i32::try_from(int(2)?).ok()?), int(3)?);
            }
            _ => {}
        }
        Some(())
    }

    /// Sorts the final log of each partition by offset (a dump may list partitions in any
    /// order, and records of one partition as they arrived).
    pub fn normalize(&mut self) {
        for records in self.log.values_mut() {
            records.sort_by_key(|(offset, _)| *offset);
            records.dedup();
        }
    }
}

/// An acknowledged record that is not in the final log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostWrite {
    pub value: String,
    pub partition: i32,
    pub offset: i64,
    pub acked_ms: u64,
}

/// A value found at several places of the final log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Duplicate {
    pub value: String,
    pub places: Vec<(i32, i64)>,
}

/// Who claimed an offset the final log disagrees with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    Ack { producer: String },
    Poll { group: String, member: String },
}

/// An acknowledgement or a poll naming `(partition, offset)` for `value`, where the final
/// log holds `found` instead (`None`: no record there).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InconsistentOffset {
    pub claim: Claim,
    pub time_ms: u64,
    pub value: String,
    pub partition: i32,
    pub offset: i64,
    pub found: Option<String>,
}

/// Two records of `producer` in `partition`: the one sent later (`later_seq`) is at a lower
/// offset than the one sent earlier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NonMonotonicSend {
    pub producer: String,
    pub partition: i32,
    /// (seq, offset) of the earlier send.
    pub earlier: (u64, i64),
    /// (seq, offset) of the later send, at a lower offset.
    pub later: (u64, i64),
}

/// A commit of `offset` by `group` for `partition` at `time_ms` (`None`: the committed
/// offset at the end) while the record at `unread` had not been polled by any member of the
/// group (`None`: `offset` is past the end of the final log).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedUnread {
    pub group: String,
    pub member: Option<String>,
    pub partition: i32,
    pub offset: i64,
    pub time_ms: Option<u64>,
    pub unread: Option<i64>,
}

/// A gap between two consecutive acknowledgements in a partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    pub partition: i32,
    pub from_ms: u64,
    pub to_ms: u64,
    /// Names of the faults whose time overlaps the gap (empty: none).
    pub causes: Vec<String>,
}

impl Window {
    pub fn length_ms(&self) -> u64 {
        self.to_ms - self.from_ms
    }
}

/// The longest window around one fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultWindow {
    pub fault: Fault,
    /// The longest gap between acknowledgements of any partition overlapping the fault's
    /// time, and that partition (`None`: no partition had two acknowledgements around it).
    pub longest: Option<(i32, u64)>,
}

/// Median and maximum of the fault windows of one kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KindFigures {
    pub kind: String,
    pub faults: usize,
    pub median_ms: u64,
    pub max_ms: u64,
}

/// What the checker found.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub acknowledged: usize,
    pub send_failures: usize,
    pub log_records: usize,
    pub polls: usize,
    pub commits: usize,
    pub lost: Vec<LostWrite>,
    pub duplicates: Vec<Duplicate>,
    pub inconsistent: Vec<InconsistentOffset>,
    pub non_monotonic: Vec<NonMonotonicSend>,
    pub committed_unread: Vec<CommittedUnread>,
    /// Windows of at least the threshold, by partition then time.
    pub windows: Vec<Window>,
    pub threshold_ms: u64,
    /// Each partition's longest gap between acknowledgements (any length).
    pub longest_per_partition: Vec<Window>,
    pub per_fault: Vec<FaultWindow>,
    pub per_kind: Vec<KindFigures>,
    /// Per group: records of the final log no member ever polled (not an anomaly by itself:
    /// a group may stop before the end).
    pub never_polled: BTreeMap<String, usize>,
    /// Times are printed relative to this one (wall-clock ms; 0 prints them as they are).
    pub origin_ms: u64,
}

impl Report {
    /// Whether no anomaly was found (windows are figures, not anomalies).
    pub fn is_clean(&self) -> bool {
        self.lost.is_empty()
            && self.duplicates.is_empty()
            && self.inconsistent.is_empty()
            && self.non_monotonic.is_empty()
            && self.committed_unread.is_empty()
    }
}

/// Checks `history`; gaps between acknowledgements of at least `threshold_ms` are listed as
/// unavailability windows.
pub fn check(history: &History, threshold_ms: u64) -> Report {
    let mut history = history.clone();
    history.normalize();
    let history = &history;
    // value → places in the final log.
    let mut places: HashMap<&str, Vec<(i32, i64)>> = HashMap::new();
    let mut at: HashMap<(i32, i64), &str> = HashMap::new();
    for (&partition, records) in &history.log {
        for (offset, value) in records {
            places
                .entry(value.as_str())
                .or_default()
                .push((partition, *offset));
            at.insert((partition, *offset), value.as_str());
        }
    }
    let mut report = Report {
        acknowledged: history.acks.len(),
        send_failures: history.send_failures.len(),
        log_records: at.len(),
        polls: history.polls.len(),
        commits: history.commits.len(),
        threshold_ms,
        ..Report::default()
    };

    for ack in &history.acks {
        let value = ack.value();
        let Some(found) = places.get(value.as_str()) else {
            report.lost.push(LostWrite {
                value,
                partition: ack.partition,
                offset: ack.offset,
                acked_ms: ack.time_ms,
            });
            continue;
        };
        if !found.contains(&(ack.partition, ack.offset)) {
            report.inconsistent.push(InconsistentOffset {
                claim: Claim::Ack {
                    producer: ack.producer.clone(),
                },
                time_ms: ack.time_ms,
                found: at.get(&(ack.partition, ack.offset)).map(|v| v.to_string()),
                value,
                partition: ack.partition,
                offset: ack.offset,
            });
        }
    }

    let mut duplicates: Vec<Duplicate> = places
        .iter()
        .filter(|(_, places)| places.len() > 1)
        .map(|(value, places)| Duplicate {
            value: value.to_string(),
            places: places.clone(),
        })
        .collect();
    duplicates.sort_by(|a, b| a.places.cmp(&b.places));
    report.duplicates = duplicates;

    for poll in &history.polls {
        let found = at.get(&(poll.partition, poll.offset)).copied();
        if found != Some(poll.value.as_str()) {
            report.inconsistent.push(InconsistentOffset {
                claim: Claim::Poll {
                    group: poll.group.clone(),
                    member: poll.member.clone(),
                },
                time_ms: poll.time_ms,
                value: poll.value.clone(),
                partition: poll.partition,
                offset: poll.offset,
                found: found.map(str::to_string),
            });
        }
    }

    report.non_monotonic = non_monotonic_sends(history);
    report.committed_unread = committed_unread(history);
    report.never_polled = never_polled(history);
    unavailability(history, &mut report);
    report
}

fn non_monotonic_sends(history: &History) -> Vec<NonMonotonicSend> {
    let mut found = Vec::new();
    for (&partition, records) in &history.log {
        // The last (seq, offset) of each producer seen so far in offset order.
        let mut last: HashMap<&str, (u64, i64)> = HashMap::new();
        let mut seen: BTreeSet<(&str, u64)> = BTreeSet::new();
        for (offset, value) in records {
            let Some((producer, seq)) = parse_value(value) else {
                continue;
            };
            // A second copy of a send is a duplicate, reported as such, not a reordering.
            if !seen.insert((producer, seq)) {
                continue;
            }
            if let Some(&(prev_seq, prev_offset)) = last.get(producer) {
                if seq <= prev_seq {
                    found.push(NonMonotonicSend {
                        producer: producer.to_string(),
                        partition,
                        earlier: (seq, *offset),
                        later: (prev_seq, prev_offset),
                    });
                    continue;
                }
            }
            last.insert(producer, (seq, *offset));
        }
    }
    found
}

/// For each (group, partition): the final log's offsets in order and, for each, the time by
/// which it and every offset before it had been polled by some member (`u64::MAX`: never).
fn read_prefixes(history: &History) -> BTreeMap<(&str, i32), Vec<(i64, u64)>> {
    let mut first_poll: HashMap<(&str, i32, i64), u64> = HashMap::new();
    for poll in &history.polls {
        let entry = first_poll
            .entry((poll.group.as_str(), poll.partition, poll.offset))
            .or_insert(u64::MAX);
        *entry = (*entry).min(poll.time_ms);
    }
    let groups: BTreeSet<&str> = history
        .polls
        .iter()
        .map(|p| p.group.as_str())
        .chain(history.commits.iter().map(|c| c.group.as_str()))
        .chain(history.final_commits.keys().map(|(g, _)| g.as_str()))
        .collect();
    let mut prefixes = BTreeMap::new();
    for group in groups {
        for (&partition, records) in &history.log {
            let mut by = 0u64;
            let prefix = records
                .iter()
                .map(|(offset, _)| {
                    let polled = first_poll
                        .get(&(group, partition, *offset))
                        .copied()
                        .unwrap_or(u64::MAX);
                    by = by.max(polled);
                    (*offset, by)
                })
                .collect();
            prefixes.insert((group, partition), prefix);
        }
    }
    prefixes
}

fn committed_unread(history: &History) -> Vec<CommittedUnread> {
    let prefixes = read_prefixes(history);
    let empty = Vec::new();
    let log_end = |partition: i32| {
        history
            .log
            .get(&partition)
            .and_then(|records| records.last())
            .map_or(0, |(offset, _)| offset + 1)
    };
    let mut found: BTreeMap<(String, i32, Option<i64>), CommittedUnread> = BTreeMap::new();
    let commits = history
        .commits
        .iter()
        .map(|c| {
            (
                c.group.as_str(),
                Some(c.member.as_str()),
                c.partition,
                c.offset,
                Some(c.time_ms),
            )
        })
        .chain(
            history
                .final_commits
                .iter()
                .map(|((group, partition), offset)| {
                    (group.as_str(), None, *partition, *offset, None)
                }),
        );
    for (group, member, partition, offset, time) in commits {
        let unread = if offset > log_end(partition) {
            Some(None)
        } else {
            let prefix = prefixes.get(&(group, partition)).unwrap_or(&empty);
            // The records below the committed offset.
            let below = prefix.partition_point(|(o, _)| *o < offset);
            let deadline = time.unwrap_or(u64::MAX - 1);
            if below > 0 && prefix[below - 1].1 > deadline {
                // The first record below the commit not polled by then.
                let first = prefix.partition_point(|(_, by)| *by <= deadline);
                Some(Some(prefix[first].0))
            } else {
                None
            }
        };
        if let Some(unread) = unread {
            // One report per (group, partition, first unread record): the commits after
            // it that skip the same record say nothing new.
            found
                .entry((group.to_string(), partition, unread))
                .or_insert(CommittedUnread {
                    group: group.to_string(),
                    member: member.map(str::to_string),
                    partition,
                    offset,
                    time_ms: time,
                    unread,
                });
        }
    }
    found.into_values().collect()
}

fn never_polled(history: &History) -> BTreeMap<String, usize> {
    let polled: HashMap<&str, BTreeSet<(i32, i64)>> =
        history.polls.iter().fold(HashMap::new(), |mut acc, p| {
            acc.entry(p.group.as_str())
                .or_default()
                .insert((p.partition, p.offset));
            acc
        });
    polled
        .iter()
        .map(|(group, seen)| {
            let missing = history
                .log
                .iter()
                .flat_map(|(&p, records)| records.iter().map(move |(o, _)| (p, *o)))
                .filter(|place| !seen.contains(place))
                .count();
            (group.to_string(), missing)
        })
        .collect()
}

fn overlaps(from_ms: u64, to_ms: u64, fault: &Fault) -> bool {
    from_ms <= fault.end_ms && to_ms >= fault.start_ms
}

fn unavailability(history: &History, report: &mut Report) {
    let mut times: BTreeMap<i32, Vec<u64>> = BTreeMap::new();
    for ack in &history.acks {
        times.entry(ack.partition).or_default().push(ack.time_ms);
    }
    let causes = |from_ms: u64, to_ms: u64| -> Vec<String> {
        history
            .faults
            .iter()
            .filter(|f| overlaps(from_ms, to_ms, f))
            .map(Fault::name)
            .collect()
    };
    let mut gaps: Vec<(i32, u64, u64)> = Vec::new();
    for (&partition, times) in &mut times {
        times.sort_unstable();
        let mut longest: Option<(u64, u64)> = None;
        for pair in times.windows(2) {
            let (from, to) = (pair[0], pair[1]);
            gaps.push((partition, from, to));
            if longest.is_none_or(|(a, b)| to - from > b - a) {
                longest = Some((from, to));
            }
            if to - from >= report.threshold_ms {
                report.windows.push(Window {
                    partition,
                    from_ms: from,
                    to_ms: to,
                    causes: causes(from, to),
                });
            }
        }
        if let Some((from, to)) = longest {
            report.longest_per_partition.push(Window {
                partition,
                from_ms: from,
                to_ms: to,
                causes: causes(from, to),
            });
        }
    }
    for fault in &history.faults {
        let longest = gaps
            .iter()
            .filter(|(_, from, to)| overlaps(*from, *to, fault))
            .map(|(partition, from, to)| (*partition, to - from))
            .max_by_key(|(_, length)| *length);
        report.per_fault.push(FaultWindow {
            fault: fault.clone(),
            longest,
        });
    }
    let mut by_kind: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for window in &report.per_fault {
        if let Some((_, length)) = window.longest {
            by_kind
                .entry(window.fault.kind.as_str())
                .or_default()
                .push(length);
        }
    }
    report.per_kind = by_kind
        .into_iter()
        .map(|(kind, mut lengths)| {
            lengths.sort_unstable();
            KindFigures {
                kind: kind.to_string(),
                faults: lengths.len(),
                median_ms: median(&lengths),
                max_ms: *lengths.last().unwrap_or(&0),
            }
        })
        .collect();
}

/// The median of sorted `values` (the mean of the two middle ones for an even count).
fn median(values: &[u64]) -> u64 {
    match values.len() {
        0 => 0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2,
    }
}

fn seconds(ms: u64) -> String {
    format!("{}.{:03} s", ms / 1000, ms % 1000)
}

impl Report {
    /// `time_ms` as the report prints it: seconds since [`Report::origin_ms`].
    fn at(&self, time_ms: u64) -> String {
        format!("t={}", seconds(time_ms.saturating_sub(self.origin_ms)))
    }
}

/// Prints at most this many examples of each anomaly.
const EXAMPLES: usize = 10;

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "records: {} acknowledged, {} given up by their producer, {} in the final log; {} polls, {} commits",
            self.acknowledged, self.send_failures, self.log_records, self.polls, self.commits
        )?;
        writeln!(
            f,
            "anomalies: {} lost writes, {} duplicates, {} inconsistent offsets, {} non-monotonic sends, {} committed but unread",
            self.lost.len(),
            self.duplicates.len(),
            self.inconsistent.len(),
            self.non_monotonic.len(),
            self.committed_unread.len()
        )?;
        for lost in self.lost.iter().take(EXAMPLES) {
            writeln!(
                f,
                "  lost write: {} acknowledged at {}/{} ({})",
                lost.value,
                lost.partition,
                lost.offset,
                self.at(lost.acked_ms)
            )?;
        }
        for duplicate in self.duplicates.iter().take(EXAMPLES) {
            writeln!(
                f,
                "  duplicate: {} at {:?}",
                duplicate.value, duplicate.places
            )?;
        }
        for wrong in self.inconsistent.iter().take(EXAMPLES) {
            writeln!(
                f,
                "  inconsistent offset: {:?} said {} is at {}/{} ({}), the log holds {:?} there",
                wrong.claim,
                wrong.value,
                wrong.partition,
                wrong.offset,
                self.at(wrong.time_ms),
                wrong.found
            )?;
        }
        for send in self.non_monotonic.iter().take(EXAMPLES) {
            writeln!(
                f,
                "  non-monotonic send: {} in partition {}: seq {} at offset {} after seq {} at offset {}",
                send.producer, send.partition, send.earlier.0, send.earlier.1, send.later.0, send.later.1
            )?;
        }
        for commit in self.committed_unread.iter().take(EXAMPLES) {
            writeln!(
                f,
                "  committed but unread: group {} ({}) committed {}/{} ({}) but {}",
                commit.group,
                commit.member.as_deref().unwrap_or("final commit"),
                commit.partition,
                commit.offset,
                commit.time_ms.map_or("at the end".into(), |t| self.at(t)),
                commit
                    .unread
                    .map_or("that is past the log's end".into(), |o| format!(
                        "offset {o} had not been read"
                    ))
            )?;
        }
        for (group, missing) in &self.never_polled {
            writeln!(
                f,
                "group {group}: {missing} records of the log never polled"
            )?;
        }
        writeln!(
            f,
            "unavailability windows (gaps between acknowledgements of at least {}): {}",
            seconds(self.threshold_ms),
            self.windows.len()
        )?;
        for window in &self.windows {
            writeln!(
                f,
                "  partition {}: {} from {} ({})",
                window.partition,
                seconds(window.length_ms()),
                self.at(window.from_ms),
                cause_text(&window.causes)
            )?;
        }
        writeln!(f, "longest gap per partition:")?;
        for window in &self.longest_per_partition {
            writeln!(
                f,
                "  partition {}: {} ({})",
                window.partition,
                seconds(window.length_ms()),
                cause_text(&window.causes)
            )?;
        }
        writeln!(
            f,
            "per fault (longest gap of any partition overlapping it):"
        )?;
        for window in &self.per_fault {
            writeln!(
                f,
                "  {} at {} until recovered {} later: {}",
                window.fault.name(),
                self.at(window.fault.start_ms),
                seconds(window.fault.end_ms - window.fault.start_ms),
                window
                    .longest
                    .map_or("no acknowledgements around it".into(), |(p, ms)| {
                        format!("{} (partition {p})", seconds(ms))
                    })
            )?;
        }
        writeln!(f, "per fault kind (median / max):")?;
        for kind in &self.per_kind {
            writeln!(
                f,
                "  {}: {} faults, {} / {}",
                kind.kind,
                kind.faults,
                seconds(kind.median_ms),
                seconds(kind.max_ms)
            )?;
        }
        Ok(())
    }
}

fn cause_text(causes: &[String]) -> String {
    if causes.is_empty() {
        "no fault".into()
    } else {
        causes.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clean history: producer `a` sends seqs 0..4 round-robin over partitions 0 and 1,
    /// each acknowledged 100 ms apart; group `g` polls everything and commits after each
    /// record; the final commits are the log ends.
    fn clean() -> History {
        let mut history = History::default();
        let mut text = String::new();
        for seq in 0..4u64 {
            let partition = seq % 2;
            let offset = seq / 2;
            let time = 1000 + seq * 100;
            text.push_str(&format!("ACK {time} a {seq} {partition} {offset}\n"));
            text.push_str(&format!("LOG {partition} {offset} a-{seq}\n"));
            text.push_str(&format!(
                "POLL {} g m1 {partition} {offset} a-{seq}\n",
                time + 10
            ));
            text.push_str(&format!(
                "COMMIT {} g m1 {partition} {}\n",
                time + 20,
                offset + 1
            ));
        }
        text.push_str("COMMITTED g 0 2\nCOMMITTED g 1 2\nPASS produce 4\n");
        history.add_lines(&text).expect("well-formed");
        history
    }

    #[test]
    fn a_clean_history_has_no_anomaly() {
        let report = check(&clean(), 1000);
        assert!(report.is_clean(), "{report}");
        assert_eq!(report.acknowledged, 4);
        assert_eq!(report.log_records, 4);
        assert_eq!(report.never_polled.get("g"), Some(&0));
        assert!(report.windows.is_empty());
    }

    #[test]
    fn malformed_event_lines_are_refused() {
        let mut history = History::default();
        assert_eq!(
            history.add_lines("ACK 12 a x 0 0\n"),
            Err(BadLine("ACK 12 a x 0 0".into()))
        );
        assert!(history.add_lines("LOG 0\n").is_err());
    }

    #[test]
    fn an_acknowledged_record_missing_from_the_log_is_a_lost_write() {
        let mut history = clean();
        history.log.get_mut(&1).expect("partition 1").pop();
        let report = check(&history, 1000);
        assert_eq!(
            report.lost,
            vec![LostWrite {
                value: "a-3".into(),
                partition: 1,
                offset: 1,
                acked_ms: 1300
            }]
        );
        assert!(!report.is_clean());
    }

    #[test]
    fn a_value_twice_in_the_log_is_a_duplicate() {
        let mut history = clean();
        history
            .add_lines("LOG 0 2 a-2\n")
            .expect("well-formed line");
        let report = check(&history, 1000);
        assert_eq!(
            report.duplicates,
            vec![Duplicate {
                value: "a-2".into(),
                places: vec![(0, 1), (0, 2)]
            }]
        );
        assert!(report.lost.is_empty());
        // The second copy is not also counted as a send out of order.
        assert!(report.non_monotonic.is_empty());
        assert!(!report.is_clean());
    }

    #[test]
    fn an_acknowledgement_at_another_offset_is_inconsistent() {
        let mut history = clean();
        // The log holds a-2 at 0/1, but the producer was told 0/0.
        history.acks[2].offset = 0;
        let report = check(&history, 1000);
        assert_eq!(report.inconsistent.len(), 1, "{report}");
        let wrong = &report.inconsistent[0];
        assert_eq!(
            (
                &wrong.claim,
                wrong.value.as_str(),
                wrong.offset,
                wrong.found.as_deref()
            ),
            (
                &Claim::Ack {
                    producer: "a".into()
                },
                "a-2",
                0,
                Some("a-0")
            )
        );
        assert!(report.lost.is_empty());
    }

    #[test]
    fn a_poll_disagreeing_with_the_log_is_inconsistent() {
        let mut history = clean();
        // A member was handed a record at 1/5, which the final log does not hold.
        history
            .add_lines("POLL 2000 g m2 1 5 a-1\n")
            .expect("well-formed line");
        let report = check(&history, 1000);
        assert_eq!(report.inconsistent.len(), 1, "{report}");
        assert_eq!(
            report.inconsistent[0].claim,
            Claim::Poll {
                group: "g".into(),
                member: "m2".into()
            }
        );
        assert_eq!(report.inconsistent[0].found, None);
    }

    #[test]
    fn records_of_one_producer_out_of_send_order_are_non_monotonic() {
        let mut history = clean();
        // Partition 0 holds a-2 before a-0.
        let records = history.log.get_mut(&0).expect("partition 0");
        records[0].1 = "a-2".into();
        records[1].1 = "a-0".into();
        let report = check(&history, 1000);
        assert_eq!(
            report.non_monotonic,
            vec![NonMonotonicSend {
                producer: "a".into(),
                partition: 0,
                earlier: (0, 1),
                later: (2, 0),
            }]
        );
        // Another producer's records interleaved in between are in order.
        let mut other = clean();
        other
            .add_lines("LOG 0 2 b-7\nLOG 0 3 b-9\n")
            .expect("well-formed lines");
        assert!(check(&other, 1000).non_monotonic.is_empty());
    }

    #[test]
    fn a_commit_past_a_record_nobody_in_the_group_read_is_committed_but_unread() {
        let mut history = clean();
        // Nobody in g read 0/0, which every commit of partition 0 skips (one report for the
        // record). A member of another group read it, which does not count for g.
        history
            .polls
            .retain(|p| !(p.partition == 0 && p.offset == 0));
        history
            .add_lines("POLL 1001 other x 0 0 a-0\n")
            .expect("well-formed line");
        let report = check(&history, 1000);
        assert_eq!(
            report.committed_unread,
            vec![CommittedUnread {
                group: "g".into(),
                member: Some("m1".into()),
                partition: 0,
                offset: 1,
                time_ms: Some(1020),
                unread: Some(0),
            }],
            "{report}"
        );
    }

    #[test]
    fn a_commit_before_the_record_was_read_is_committed_but_unread() {
        let mut history = clean();
        // 1/1 was read at 1310, but m2 committed 1/2 at 1305.
        history
            .add_lines("COMMIT 1305 g m2 1 2\n")
            .expect("well-formed line");
        let report = check(&history, 1000);
        assert_eq!(report.committed_unread.len(), 1, "{report}");
        assert_eq!(report.committed_unread[0].unread, Some(1));
        assert_eq!(report.committed_unread[0].member.as_deref(), Some("m2"));
    }

    #[test]
    fn a_final_commit_past_the_log_end_is_committed_but_unread() {
        let mut history = clean();
        history.final_commits.insert(("g".into(), 1), 3);
        let report = check(&history, 1000);
        assert_eq!(
            report.committed_unread,
            vec![CommittedUnread {
                group: "g".into(),
                member: None,
                partition: 1,
                offset: 3,
                time_ms: None,
                unread: None,
            }]
        );
    }

    #[test]
    fn gaps_between_acknowledgements_are_windows_attributed_to_their_fault() {
        let mut history = History::default();
        // Partition 0: acks every 100 ms from 0 to 2000, then 2000 → 5000 (a kill9 at
        // 2100-2200), then 5000 → 5100. Partition 1: 0 → 1500 (no fault), then 1500 → 4000
        // (the kill9), 4000 → 9000 (a pause at 6000-8000 and a second kill9 at 8500-8600).
        let mut text = String::new();
        let mut seq = 0;
        let mut ack = |partition: i32, time: u64, text: &mut String| {
            text.push_str(&format!("ACK {time} p {seq} {partition} {seq}\n"));
            text.push_str(&format!("LOG {partition} {seq} p-{seq}\n"));
            seq += 1;
        };
        for time in (0..=2000).step_by(100).chain([5000, 5100]) {
            ack(0, time, &mut text);
        }
        for time in [0, 1500, 4000, 9000] {
            ack(1, time, &mut text);
        }
        history.add_lines(&text).expect("well-formed");
        let fault = |kind: &str, start_ms, end_ms| Fault {
            kind: kind.into(),
            target: "kaas-1".into(),
            start_ms,
            end_ms,
        };
        history.faults = vec![
            fault("kill9", 2100, 2200),
            fault("pause", 6000, 8000),
            fault("kill9", 8500, 8600),
        ];
        let report = check(&history, 1000);
        let windows: Vec<(i32, u64, Vec<String>)> = report
            .windows
            .iter()
            .map(|w| (w.partition, w.length_ms(), w.causes.clone()))
            .collect();
        assert_eq!(
            windows,
            vec![
                (0, 3000, vec!["kill9 kaas-1".to_string()]),
                (1, 1500, vec![]),
                (1, 2500, vec!["kill9 kaas-1".to_string()]),
                (
                    1,
                    5000,
                    vec!["pause kaas-1".to_string(), "kill9 kaas-1".to_string()]
                ),
            ]
        );
        assert_eq!(
            report
                .longest_per_partition
                .iter()
                .map(|w| (w.partition, w.length_ms()))
                .collect::<Vec<_>>(),
            vec![(0, 3000), (1, 5000)]
        );
        assert_eq!(
            report
                .per_fault
                .iter()
                .map(|w| w.longest)
                .collect::<Vec<_>>(),
            vec![Some((0, 3000)), Some((1, 5000)), Some((1, 5000))]
        );
        assert_eq!(
            report.per_kind,
            vec![
                KindFigures {
                    kind: "kill9".into(),
                    faults: 2,
                    median_ms: 4000,
                    max_ms: 5000
                },
                KindFigures {
                    kind: "pause".into(),
                    faults: 1,
                    median_ms: 5000,
                    max_ms: 5000
                },
            ]
        );
        // Windows are figures, not anomalies.
        assert!(report.is_clean());
    }
}
