//! Persisted form of a consumer group.
//!
//! The blob is one JSON object (UTF-8), written whole by the coordinator after any call that
//! reports a change and before it answers the request, so what a crash leaves behind is the
//! last answered state or the one before it; both are consistent groups.
//!
//! ```text
//! { "version": 1,
//!   "group_epoch": i32, "assignment_epoch": i32, "member_id_sequence": u64,
//!   "subscribed_metadata": [[topic name, topic id (32 hex digits), partitions], ...],
//!   "members": [{ "member_id", "instance_id"?, "rack_id"?, "client_id", "client_host",
//!                 "subscribed_topic_names": [..], "subscribed_topic_regex"?,
//!                 "server_assignor"?, "rebalance_timeout_ms", "member_epoch",
//!                 "previous_member_epoch", "state": "stable" | "unrevoked_partitions" |
//!                 "unreleased_partitions",
//!                 "assigned": [[topic id, [partition, ...]], ...],
//!                 "pending_revocation": [[topic id, [partition, ...]], ...],
//!                 "assignment_epochs"?: [[topic id, partition, member epoch], ...] }, ...],
//!   "target": [[member id, [[topic id, [partition, ...]], ...]], ...] }
//! ```
//!
//! `assignment_epochs` lists the owned partitions assigned before the member's current epoch
//! (KIP-1251; see [`Member::assignment_epochs`]); a blob without it, as written before it
//! existed, reads as every partition assigned at the member's epoch.
//!
//! Timers are not stored: [`ConsumerGroup::restore`] restarts every session (and pending
//! revocation) deadline from the time the group is rebuilt. Decoding checks the blob before
//! trusting it (version, sizes, no partition owned twice) and fails instead of panicking;
//! JSON holds no length prefixes, so memory use is bounded by the blob's size.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::group::ConsumerGroup;
use super::member::{Assignment, Member, MemberState};
use crate::model::uuid_text::{format_uuid, parse_uuid};
use crate::protocol::Uuid;

/// The format version written by [`ConsumerGroup::encode`].
const VERSION: u32 = 1;
/// Largest blob `decode` accepts.
const MAX_BLOB: usize = 64 << 20;

/// Why a persisted group could not be read back.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StateDecodeError {
    /// The blob is not the JSON document described in the module docs.
    #[error("malformed consumer group state: {0}")]
    Malformed(String),
    /// The blob was written by a newer format version.
    #[error("unsupported consumer group state version {0}")]
    UnsupportedVersion(u32),
    /// The blob parses but describes an impossible group.
    #[error("inconsistent consumer group state: {0}")]
    Inconsistent(String),
}

type TopicPartitions = Vec<(String, Vec<i32>)>;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredGroup {
    version: u32,
    group_epoch: i32,
    assignment_epoch: i32,
    member_id_sequence: u64,
    subscribed_metadata: Vec<(String, String, i32)>,
    members: Vec<StoredMember>,
    target: Vec<(String, TopicPartitions)>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredMember {
    member_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    instance_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rack_id: Option<String>,
    client_id: String,
    client_host: String,
    subscribed_topic_names: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    subscribed_topic_regex: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    server_assignor: Option<String>,
    rebalance_timeout_ms: i32,
    member_epoch: i32,
    previous_member_epoch: i32,
    state: String,
    assigned: TopicPartitions,
    pending_revocation: TopicPartitions,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    assignment_epochs: Vec<(String, i32, i32)>,
}

fn uuid_from_hex(text: &str) -> Result<Uuid, StateDecodeError> {
    parse_uuid(text).ok_or_else(|| StateDecodeError::Malformed(format!("bad topic id {text:?}")))
}

fn store_assignment(assignment: &Assignment) -> TopicPartitions {
    assignment
        .iter()
        .map(|(id, partitions)| (format_uuid(id), partitions.iter().copied().collect()))
        .collect()
}

fn load_assignment(stored: TopicPartitions) -> Result<Assignment, StateDecodeError> {
    let mut out = Assignment::new();
    for (id, partitions) in stored {
        if partitions.iter().any(|p| *p < 0) {
            return Err(StateDecodeError::Inconsistent(format!(
                "negative partition in {id}"
            )));
        }
        let set: BTreeSet<i32> = partitions.into_iter().collect();
        if !set.is_empty() {
            out.entry(uuid_from_hex(&id)?).or_default().extend(set);
        }
    }
    Ok(out)
}

fn state_from_str(state: &str) -> Result<MemberState, StateDecodeError> {
    [
        MemberState::Stable,
        MemberState::UnrevokedPartitions,
        MemberState::UnreleasedPartitions,
    ]
    .into_iter()
    .find(|s| s.as_str() == state)
    .ok_or_else(|| StateDecodeError::Malformed(format!("unknown member state {state:?}")))
}

/// `member` with its stored assignment epochs, each for a partition it owns.
fn with_assignment_epochs(
    mut member: Member,
    stored: Vec<(String, i32, i32)>,
) -> Result<Member, StateDecodeError> {
    for (topic, partition, epoch) in stored {
        let key = (uuid_from_hex(&topic)?, partition);
        if epoch < 0 || member.assignment_epoch_of(key).is_none() {
            return Err(StateDecodeError::Inconsistent(format!(
                "member {} has assignment epoch {epoch} for {topic}-{partition}",
                member.member_id
            )));
        }
        member.assignment_epochs.insert(key, epoch);
    }
    Ok(member)
}

impl ConsumerGroup {
    /// The persistent state (see the module docs for the format).
    pub fn encode(&self) -> Vec<u8> {
        let stored = StoredGroup {
            version: VERSION,
            group_epoch: self.group_epoch,
            assignment_epoch: self.assignment_epoch,
            member_id_sequence: self.member_id_sequence,
            subscribed_metadata: self
                .subscribed_metadata
                .iter()
                .map(|(name, (id, partitions))| (name.clone(), format_uuid(id), *partitions))
                .collect(),
            members: self
                .members
                .values()
                .map(|m| StoredMember {
                    member_id: m.member_id.clone(),
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topic_names: m.subscribed_topic_names.iter().cloned().collect(),
                    subscribed_topic_regex: m.subscribed_topic_regex.clone(),
                    server_assignor: m.server_assignor.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    member_epoch: m.member_epoch,
                    previous_member_epoch: m.previous_member_epoch,
                    state: m.state.as_str().to_owned(),
                    assigned: store_assignment(&m.assigned),
                    pending_revocation: store_assignment(&m.pending_revocation),
                    assignment_epochs: m
                        .assignment_epochs
                        .iter()
                        .map(|((topic, partition), epoch)| (format_uuid(topic), *partition, *epoch))
                        .collect(),
                })
                .collect(),
            target: self
                .target
                .iter()
                .map(|(id, assignment)| (id.clone(), store_assignment(assignment)))
                .collect(),
        };
        // Serializing plain structs of strings and integers to a Vec cannot fail.
        serde_json::to_vec(&stored).unwrap_or_default()
    }

    /// Rebuilds a group from [`ConsumerGroup::encode`]'s output. Timers are not armed: call
    /// [`ConsumerGroup::restore`] next.
    pub fn decode(group_id: &str, bytes: &[u8]) -> Result<Self, StateDecodeError> {
        if bytes.len() > MAX_BLOB {
            return Err(StateDecodeError::Malformed("blob too large".to_owned()));
        }
        let stored: StoredGroup = serde_json::from_slice(bytes)
            .map_err(|e| StateDecodeError::Malformed(e.to_string()))?;
        if stored.version != VERSION {
            return Err(StateDecodeError::UnsupportedVersion(stored.version));
        }
        if stored.group_epoch < 0
            || stored.assignment_epoch < 0
            || stored.assignment_epoch > stored.group_epoch
        {
            return Err(StateDecodeError::Inconsistent("bad epochs".to_owned()));
        }
        let mut group = ConsumerGroup::new(group_id);
        group.group_epoch = stored.group_epoch;
        group.assignment_epoch = stored.assignment_epoch;
        group.member_id_sequence = stored.member_id_sequence;
        for (name, id, partitions) in stored.subscribed_metadata {
            if partitions < 0 {
                return Err(StateDecodeError::Inconsistent(format!(
                    "topic {name} has {partitions} partitions"
                )));
            }
            group
                .subscribed_metadata
                .insert(name, (uuid_from_hex(&id)?, partitions));
        }
        let mut owned: BTreeSet<(Uuid, i32)> = BTreeSet::new();
        let mut instances: BTreeSet<String> = BTreeSet::new();
        for stored in stored.members {
            let member = Member {
                member_id: stored.member_id,
                instance_id: stored.instance_id,
                rack_id: stored.rack_id,
                client_id: stored.client_id,
                client_host: stored.client_host,
                subscribed_topic_names: stored.subscribed_topic_names.into_iter().collect(),
                subscribed_topic_regex: stored.subscribed_topic_regex,
                server_assignor: stored.server_assignor,
                rebalance_timeout_ms: stored.rebalance_timeout_ms,
                member_epoch: stored.member_epoch,
                previous_member_epoch: stored.previous_member_epoch,
                state: state_from_str(&stored.state)?,
                assigned: load_assignment(stored.assigned)?,
                pending_revocation: load_assignment(stored.pending_revocation)?,
                assignment_epochs: BTreeMap::new(),
            };
            let member = with_assignment_epochs(member, stored.assignment_epochs)?;
            if member.member_epoch < -2 || member.member_epoch > group.group_epoch {
                return Err(StateDecodeError::Inconsistent(format!(
                    "member {} has epoch {}",
                    member.member_id, member.member_epoch
                )));
            }
            if let Some(instance) = &member.instance_id {
                if !instances.insert(instance.clone()) {
                    return Err(StateDecodeError::Inconsistent(format!(
                        "instance id {instance} used twice"
                    )));
                }
            }
            for partition in member.owned_partitions() {
                if !owned.insert(partition) {
                    return Err(StateDecodeError::Inconsistent(format!(
                        "partition {partition:?} owned twice"
                    )));
                }
            }
            if group
                .members
                .insert(member.member_id.clone(), member)
                .is_some()
            {
                return Err(StateDecodeError::Inconsistent(
                    "member id used twice".to_owned(),
                ));
            }
        }
        let mut targets: BTreeMap<String, Assignment> = BTreeMap::new();
        for (member_id, assignment) in stored.target {
            if !group.members.contains_key(&member_id) {
                return Err(StateDecodeError::Inconsistent(format!(
                    "target for unknown member {member_id}"
                )));
            }
            targets.insert(member_id, load_assignment(assignment)?);
        }
        group.target = targets;
        Ok(group)
    }
}
