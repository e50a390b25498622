//! Where things go: a partition's owner shard and a group's shard inside a broker, and the
//! coordinator broker of a group that no assignment names yet.
//!
//! The shard hashes are the ones standalone kaas has always used (FNV-1a; `net`'s
//! `model::cluster_view::owner_shard` and `groups::placement::coordinator_shard` call these), so a
//! standalone broker keeps every partition and group on the shard it was on. Changing any
//! function here moves partitions or groups: it is a compatibility change.

use crate::ids::{BrokerId, GroupId, ShardIndex};

/// FNV-1a (64-bit) of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The shard owning partition `partition` of `topic`: FNV-1a of the topic name plus the
/// partition number, modulo the shard count, so a topic's partitions spread over all shards.
pub fn owner_shard(topic: &str, partition: i32, shards: usize) -> ShardIndex {
    let hash = fnv1a(topic.as_bytes()).wrapping_add(partition as u64);
    ShardIndex((hash % shards.max(1) as u64) as usize)
}

/// Java's `String.hashCode()` (over UTF-16 code units), which Kafka's placement uses.
pub fn java_string_hash(text: &str) -> i32 {
    text.encode_utf16().fold(0i32, |hash, unit| {
        hash.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// Partitions of `__consumer_offsets` (Kafka's `offsets.topic.num.partitions` default).
pub const OFFSETS_TOPIC_PARTITIONS: i32 = 50;

/// The `__consumer_offsets` partition holding `group`: Kafka's
/// `Utils.abs(groupId.hashCode()) % 50` (`Utils.abs` maps `i32::MIN` to 0).
pub fn offsets_partition(group: &str) -> i32 {
    let hash = java_string_hash(group);
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs % OFFSETS_TOPIC_PARTITIONS
}

/// The shard coordinating `group` inside its broker: the shard serving the group's
/// `__consumer_offsets` partition (that partition modulo the shard count), so one shard holds
/// every group of a partition, as Kafka's coordinator is that partition's leader.
pub fn group_shard(group: &GroupId, shards: usize) -> ShardIndex {
    offsets_partition_shard(offsets_partition(group.as_str()), shards)
}

/// The shard serving partition `partition` of `__consumer_offsets` (and coordinating its
/// groups): the partition modulo the shard count.
pub fn offsets_partition_shard(partition: i32, shards: usize) -> ShardIndex {
    ShardIndex(partition.max(0) as usize % shards.max(1))
}

/// The coordinator of a group the assignment does not name: of `brokers`, the one with the
/// highest rendezvous weight for the group (highest-random-weight hashing); `None` if there
/// are no brokers.
///
/// Every broker computes the same answer from the same broker set, with no coordination. When
/// brokers come and go the choice stays put unless the chosen broker leaves, with one exception
/// no stateless rule can avoid: a joining broker takes over the groups for which it outweighs
/// every other (about 1 in n of them), and only those. (A rule that never moved on a join
/// would have to pick `a` from `{a}`, `b` from `{b}` and both from `{a, b}`.) The controller
/// ends even that by naming each group in the assignment once it has seen it.
pub fn fallback_coordinator(
    group: &GroupId,
    brokers: impl IntoIterator<Item = BrokerId>,
) -> Option<BrokerId> {
    let group_hash = fnv1a(group.as_str().as_bytes());
    brokers
        .into_iter()
        .max_by_key(|broker| (rendezvous_weight(group_hash, *broker), *broker))
}

/// The weight of `broker` for a group whose id hashes to `group_hash`.
fn rendezvous_weight(group_hash: u64, broker: BrokerId) -> u64 {
    mix(group_hash ^ mix(broker.0 as u32 as u64))
}

/// SplitMix64's finaliser: spreads every input bit over the whole output, which FNV-1a alone
/// does not do for inputs that differ only in their last bytes.
fn mix(mut value: u64) -> u64 {
    value = value.wrapping_add(0x9e37_79b9_7f4a_7c15);
    value = (value ^ (value >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    value = (value ^ (value >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    value ^ (value >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The values standalone kaas places by (net's `owner_shard` and `coordinator_shard`).
    #[test]
    fn shard_hashes_are_unchanged() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        let shards: Vec<usize> = (0..8).map(|p| owner_shard("orders", p, 4).0).collect();
        for shard in 0..4 {
            assert_eq!(shards.iter().filter(|s| **s == shard).count(), 2);
        }
        assert_eq!(owner_shard("orders", 3, 1), ShardIndex(0));
        assert_eq!(owner_shard("orders", 3, 0), ShardIndex(0));
        let expected = offsets_partition("billing") as usize % 3;
        assert_eq!(
            group_shard(&GroupId::new("billing"), 3),
            ShardIndex(expected)
        );
    }

    #[test]
    fn fallback_spreads_groups_over_brokers() {
        let brokers = [BrokerId(0), BrokerId(1), BrokerId(2)];
        let mut counts = [0usize; 3];
        for i in 0..3000 {
            let group = GroupId::new(&format!("group-{i}"));
            let chosen = fallback_coordinator(&group, brokers).expect("brokers exist");
            counts[chosen.0 as usize] += 1;
        }
        for count in counts {
            assert!((800..1200).contains(&count), "{counts:?}");
        }
        assert_eq!(fallback_coordinator(&GroupId::new("g"), []), None);
    }
}
