//! The persisted form of a classic group, kept as the group store's metadata blob.
//!
//! Format: one JSON object, `{"kind":"classic","version":1,...}`, with the generation,
//! protocol type and name, leader and members (ids, client, timeouts, protocols with their
//! metadata and the assignment; byte fields as lowercase hex) and, for an Empty group,
//! `empty_since_ms` (wall-clock ms when it became Empty, absent in files written before it
//! existed; offset retention then counts from each commit, as Kafka does for group metadata
//! without a state timestamp). It is written when a
//! generation completes (the leader's assignment arrived, or the group became empty). A
//! coordinator that loads it resumes the group `Stable` (or `Empty`) at that generation, with
//! every member's session restarting at load time.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::{ClassicGroup, ClassicMember, ClassicState};

/// Why a persisted group could not be read.
#[derive(Debug, thiserror::Error)]
#[error("invalid persisted classic group: {0}")]
pub struct DecodeError(String);

#[derive(Serialize, Deserialize)]
struct PersistedGroup {
    kind: String,
    version: u32,
    generation_id: i32,
    protocol_type: Option<String>,
    protocol_name: Option<String>,
    leader: Option<String>,
    members: Vec<PersistedMember>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    empty_since_ms: Option<i64>,
}

#[derive(Serialize, Deserialize)]
struct PersistedMember {
    member_id: String,
    group_instance_id: Option<String>,
    client_id: String,
    client_host: String,
    session_timeout_ms: i32,
    rebalance_timeout_ms: i32,
    protocols: Vec<(String, String)>,
    assignment: String,
}

/// The `kind` of a persisted classic group.
pub const KIND: &str = "classic";

impl ClassicGroup {
    /// The group's persistent state.
    pub fn encode(&self) -> Vec<u8> {
        let stable = self.state == ClassicState::Stable;
        let mut members: Vec<&ClassicMember> = self.members.values().collect();
        members.sort_by_key(|m| m.join_order);
        let persisted = PersistedGroup {
            kind: KIND.into(),
            version: 1,
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone(),
            protocol_name: if stable {
                self.protocol_name.clone()
            } else {
                None
            },
            leader: if stable { self.leader.clone() } else { None },
            members: if stable {
                members
                    .into_iter()
                    .map(|m| PersistedMember {
                        member_id: m.member_id.clone(),
                        group_instance_id: m.group_instance_id.clone(),
                        client_id: m.client_id.clone(),
                        client_host: m.client_host.clone(),
                        session_timeout_ms: m.session_timeout_ms,
                        rebalance_timeout_ms: m.rebalance_timeout_ms,
                        protocols: m
                            .protocols
                            .iter()
                            .map(|(name, metadata)| (name.clone(), to_hex(metadata)))
                            .collect(),
                        assignment: to_hex(&m.assignment),
                    })
                    .collect()
            } else {
                Vec::new()
            },
            empty_since_ms: self.empty_since_ms(),
        };
        serde_json::to_vec(&persisted).expect("plain data serialises")
    }

    /// Rebuilds a group from [`encode`](Self::encode)'s bytes; sessions restart at `now_ms`.
    pub fn decode(group_id: &str, bytes: &[u8], now_ms: i64) -> Result<Self, DecodeError> {
        let persisted: PersistedGroup =
            serde_json::from_slice(bytes).map_err(|e| DecodeError(e.to_string()))?;
        if persisted.kind != KIND || persisted.version != 1 {
            return Err(DecodeError(format!(
                "kind {} version {}",
                persisted.kind, persisted.version
            )));
        }
        let mut group = ClassicGroup::new(group_id);
        group.generation_id = persisted.generation_id;
        group.protocol_type = persisted.protocol_type;
        let mut members = BTreeMap::new();
        for (order, m) in persisted.members.into_iter().enumerate() {
            let protocols = m
                .protocols
                .into_iter()
                .map(|(name, metadata)| Ok((name, from_hex(&metadata)?)))
                .collect::<Result<Vec<_>, DecodeError>>()?;
            if let Some(instance) = &m.group_instance_id {
                group
                    .static_members
                    .insert(instance.clone(), m.member_id.clone());
            }
            members.insert(
                m.member_id.clone(),
                ClassicMember {
                    member_id: m.member_id,
                    group_instance_id: m.group_instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout_ms: m.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    protocols,
                    assignment: from_hex(&m.assignment)?,
                    join_order: order as u64,
                    session_deadline: now_ms + i64::from(m.session_timeout_ms),
                    awaiting_join: None,
                    awaiting_sync: None,
                },
            );
        }
        group.next_join_order = members.len() as u64;
        if !members.is_empty() {
            group.state = ClassicState::Stable;
            group.protocol_name = persisted.protocol_name;
            group.leader = persisted.leader;
        } else {
            group.empty_since_ms = persisted.empty_since_ms;
        }
        group.members = members;
        Ok(group)
    }
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(text: &str) -> Result<Bytes, DecodeError> {
    if !text.len().is_multiple_of(2) {
        return Err(DecodeError("odd hex length".into()));
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or_else(|| DecodeError("bad hex".into()))
        })
        .collect::<Result<Vec<u8>, _>>()
        .map(Bytes::from)
}
