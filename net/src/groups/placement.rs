//! Which shard coordinates a group: the shard serving the group's `__consumer_offsets`
//! partition, as Kafka's coordinator is that partition's leader. So one shard holds every
//! group of a partition and can serve the partition from them.

/// The shard of the group's `__consumer_offsets` partition (Kafka's
/// `abs(groupId.hashCode()) % 50`, then that partition's shard).
pub fn coordinator_shard(group_id: &str, shards: usize) -> usize {
    kaas_cluster::placement::group_shard(&kaas_cluster::ids::GroupId::new(group_id), shards).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_is_stable_and_in_range() {
        for shards in 1..8 {
            for id in ["", "orders", "a-much-longer-group-id"] {
                let shard = coordinator_shard(id, shards);
                assert!(shard < shards);
                assert_eq!(shard, coordinator_shard(id, shards));
            }
        }
        let spread: std::collections::HashSet<usize> = (0..64)
            .map(|i| coordinator_shard(&format!("g{i}"), 4))
            .collect();
        assert_eq!(spread.len(), 4);
    }
}
