//! Which shard coordinates a group: a stable hash of the group id within the broker.

use crate::broker::cluster_view::fnv1a;

/// FNV-1a of the group id ([`fnv1a`], as partitions are placed), modulo the shard count.
pub fn coordinator_shard(group_id: &str, shards: usize) -> usize {
    (fnv1a(group_id.as_bytes()) % shards.max(1) as u64) as usize
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
