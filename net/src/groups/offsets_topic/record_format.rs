//! The keys and values of `__consumer_offsets` records, byte for byte as Kafka 4.4's
//! `CoordinatorRecordSerde` writes them (checked against records read back from Apache Kafka
//! 4.4; the golden bytes in the tests below are such records).
//!
//! Every key starts with an `i16` record type, every value with an `i16` version; the rest
//! is the message at that version in Kafka's wire encoding (big-endian integers, `i16`
//! length-prefixed strings; compact strings and tagged fields in flexible versions).
//!
//! | record | key (type) | value version |
//! |---|---|---|
//! | committed offset | `OffsetCommitKey` (1): group, topic, partition | `OffsetCommitValue` v4 (flexible): offset, leader epoch, metadata, commit timestamp, tag 0 = topic id |
//! | classic group | `GroupMetadataKey` (2): group | `GroupMetadataValue` v3: protocol type, generation, protocol, leader, state timestamp, members |
//! | KIP-848 group | `ConsumerGroupMetadataKey` (3): group | `ConsumerGroupMetadataValue` v0 (flexible): group epoch |
//!
//! A deleted offset or group is a record with the same key and a null value (a tombstone).
//! Kafka also writes member, target-assignment and subscription records (types 4–8) for
//! KIP-848 groups; kaas does not derive those.

use bytes::{BufMut, Bytes, BytesMut};
use kaas_engine::group_store::CommittedOffset;

use crate::protocol::Uuid;

const OFFSET_COMMIT_KEY: i16 = 1;
const GROUP_METADATA_KEY: i16 = 2;
const CONSUMER_GROUP_METADATA_KEY: i16 = 3;
const OFFSET_COMMIT_VALUE_VERSION: i16 = 4;
const GROUP_METADATA_VALUE_VERSION: i16 = 3;
const CONSUMER_GROUP_METADATA_VALUE_VERSION: i16 = 0;

/// One member of a classic group as `GroupMetadataValue` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberMetadata {
    /// Member id.
    pub member_id: String,
    /// Static member id (`group.instance.id`).
    pub group_instance_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host (Kafka writes `/address`).
    pub client_host: String,
    /// Rebalance timeout (ms).
    pub rebalance_timeout_ms: i32,
    /// Session timeout (ms).
    pub session_timeout_ms: i32,
    /// The member's metadata for the chosen protocol (its subscription).
    pub subscription: Bytes,
    /// The member's assignment.
    pub assignment: Bytes,
}

/// A classic group as `GroupMetadataValue` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicGroupMetadata {
    /// Protocol type ("consumer", ...), empty when none was chosen.
    pub protocol_type: String,
    /// Generation.
    pub generation: i32,
    /// The chosen protocol (assignor).
    pub protocol: Option<String>,
    /// The leader's member id.
    pub leader: Option<String>,
    /// When the group entered its state (ms).
    pub current_state_timestamp_ms: i64,
    /// Members.
    pub members: Vec<MemberMetadata>,
}

fn put_string(out: &mut BytesMut, text: &str) {
    // Kafka's i16 length prefix; ids and names the broker accepted are far below 32 KiB,
    // and longer ones are cut rather than written with a wrong length.
    let bytes = &text.as_bytes()[..text.len().min(i16::MAX as usize)];
    out.put_i16(bytes.len() as i16);
    out.put_slice(bytes);
}

fn put_nullable_string(out: &mut BytesMut, text: Option<&str>) {
    match text {
        Some(text) => put_string(out, text),
        None => out.put_i16(-1),
    }
}

fn put_bytes(out: &mut BytesMut, bytes: &[u8]) {
    out.put_i32(bytes.len() as i32);
    out.put_slice(bytes);
}

fn put_unsigned_varint(out: &mut BytesMut, mut value: u64) {
    while value >= 0x80 {
        out.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

fn put_compact_string(out: &mut BytesMut, text: &str) {
    put_unsigned_varint(out, text.len() as u64 + 1);
    out.put_slice(text.as_bytes());
}

/// `OffsetCommitKey`: the key of a committed offset.
pub fn offset_commit_key(group_id: &str, topic: &str, partition: i32) -> Bytes {
    let mut out = BytesMut::with_capacity(10 + group_id.len() + topic.len());
    out.put_i16(OFFSET_COMMIT_KEY);
    put_string(&mut out, group_id);
    put_string(&mut out, topic);
    out.put_i32(partition);
    out.freeze()
}

/// `OffsetCommitValue` v4; the topic id goes in tagged field 0 when known.
pub fn offset_commit_value(committed: &CommittedOffset, topic_id: Option<Uuid>) -> Bytes {
    let mut out = BytesMut::with_capacity(48 + committed.metadata.len());
    out.put_i16(OFFSET_COMMIT_VALUE_VERSION);
    out.put_i64(committed.offset);
    out.put_i32(committed.leader_epoch);
    put_compact_string(&mut out, &committed.metadata);
    out.put_i64(committed.commit_timestamp_ms);
    match topic_id.filter(|id| *id != Uuid::NIL) {
        Some(id) => {
            put_unsigned_varint(&mut out, 1);
            put_unsigned_varint(&mut out, 0);
            put_unsigned_varint(&mut out, 16);
            out.put_slice(&id.0);
        }
        None => put_unsigned_varint(&mut out, 0),
    }
    out.freeze()
}

/// `GroupMetadataKey`: the key of a classic group's metadata.
pub fn group_metadata_key(group_id: &str) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + group_id.len());
    out.put_i16(GROUP_METADATA_KEY);
    put_string(&mut out, group_id);
    out.freeze()
}

/// `GroupMetadataValue` v3.
pub fn group_metadata_value(group: &ClassicGroupMetadata) -> Bytes {
    let mut out = BytesMut::with_capacity(64);
    out.put_i16(GROUP_METADATA_VALUE_VERSION);
    put_string(&mut out, &group.protocol_type);
    out.put_i32(group.generation);
    put_nullable_string(&mut out, group.protocol.as_deref());
    put_nullable_string(&mut out, group.leader.as_deref());
    out.put_i64(group.current_state_timestamp_ms);
    out.put_i32(group.members.len() as i32);
    for member in &group.members {
        put_string(&mut out, &member.member_id);
        put_nullable_string(&mut out, member.group_instance_id.as_deref());
        put_string(&mut out, &member.client_id);
        put_string(&mut out, &member.client_host);
        out.put_i32(member.rebalance_timeout_ms);
        out.put_i32(member.session_timeout_ms);
        put_bytes(&mut out, &member.subscription);
        put_bytes(&mut out, &member.assignment);
    }
    out.freeze()
}

/// `ConsumerGroupMetadataKey`: the key of a KIP-848 group's metadata.
pub fn consumer_group_metadata_key(group_id: &str) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + group_id.len());
    out.put_i16(CONSUMER_GROUP_METADATA_KEY);
    put_string(&mut out, group_id);
    out.freeze()
}

/// `ConsumerGroupMetadataValue` v0: the group epoch (the metadata hash, tagged field 0, is
/// left at its default and so not written).
pub fn consumer_group_metadata_value(epoch: i32) -> Bytes {
    let mut out = BytesMut::with_capacity(7);
    out.put_i16(CONSUMER_GROUP_METADATA_VALUE_VERSION);
    out.put_i32(epoch);
    put_unsigned_varint(&mut out, 0);
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn uuid(text: &str) -> Uuid {
        let mut id = [0u8; 16];
        for (i, byte) in id.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).expect("hex");
        }
        Uuid(id)
    }

    // Golden records read back from Apache Kafka 4.4 after a Java consumer of group
    // "dump-grp-1" committed offset 7, leader epoch 3, metadata "meta!" for dumpt-0.
    #[test]
    fn offset_commit_matches_kafka() {
        assert_eq!(
            hex(&offset_commit_key("dump-grp-1", "dumpt", 0)),
            "0001000a64756d702d6772702d31000564756d707400000000"
        );
        let committed = CommittedOffset {
            offset: 7,
            leader_epoch: 3,
            metadata: "meta!".into(),
            commit_timestamp_ms: 0x0000_01a2_3157_f6c1,
        };
        assert_eq!(
            hex(&offset_commit_value(
                &committed,
                Some(uuid("f4594fe02b104979a1769d0c6add22b6"))
            )),
            "0004000000000000000700000003066d65746121000001a23157f6c1010010f4594fe02b104979a1769d0c6add22b6"
        );
        assert_eq!(
            hex(&offset_commit_value(&committed, None)),
            "0004000000000000000700000003066d65746121000001a23157f6c100"
        );
    }

    #[test]
    fn group_metadata_matches_kafka() {
        assert_eq!(
            hex(&group_metadata_key("dump-grp-1")),
            "0002000a64756d702d6772702d31"
        );
        // The empty group Kafka writes when the group is created.
        let empty = ClassicGroupMetadata {
            protocol_type: String::new(),
            generation: 0,
            protocol: None,
            leader: None,
            current_state_timestamp_ms: 0x0000_01a2_3157_f485,
            members: Vec::new(),
        };
        assert_eq!(
            hex(&group_metadata_value(&empty)),
            "0003000000000000ffffffff000001a23157f48500000000"
        );
        // Generation 1, one member.
        let member_id = "consumer-dump-grp-1-1-1d86e1ca-738b-4389-88bd-a9125b2ab486";
        let subscription = "000300000001000564756d7074ffffffff00000000ffffffffffff";
        let assignment = "000300000001000564756d70740000000100000000ffffffff";
        let unhex = |text: &str| -> Bytes {
            (0..text.len() / 2)
                .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).expect("hex"))
                .collect::<Vec<u8>>()
                .into()
        };
        let stable = ClassicGroupMetadata {
            protocol_type: "consumer".into(),
            generation: 1,
            protocol: Some("range".into()),
            leader: Some(member_id.into()),
            current_state_timestamp_ms: 0x0000_01a2_3157_f502,
            members: vec![MemberMetadata {
                member_id: member_id.into(),
                group_instance_id: None,
                client_id: "consumer-dump-grp-1-1".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300_000,
                session_timeout_ms: 45_000,
                subscription: unhex(subscription),
                assignment: unhex(assignment),
            }],
        };
        let expected = format!(
            "00030008636f6e73756d657200000001000572616e6765003a{id}000001a23157f50200000001003a{id}ffff0015636f6e73756d65722d64756d702d6772702d312d31000a2f3132372e302e302e31000493e00000afc80000001b{subscription}00000019{assignment}",
            id = hex(member_id.as_bytes()),
        );
        assert_eq!(hex(&group_metadata_value(&stable)), expected);
    }

    #[test]
    fn consumer_group_metadata_matches_kafka() {
        assert_eq!(
            hex(&consumer_group_metadata_key("dump-kip-1")),
            "0003000a64756d702d6b69702d31"
        );
        // Kafka 4.4's record after the group's epoch became 3 (no metadata hash).
        assert_eq!(hex(&consumer_group_metadata_value(3)), "00000000000300");
    }
}
