//! DescribeLogDirs (key 35): the broker's one log directory (the data directory) with the size
//! of every partition in it, read on each partition's owner shard.
//!
//! Sizes are the bytes of a partition's log segments (whole batches, not preallocated space).
//! Partitions are never being moved between directories, so `offset_lag` is 0 and
//! `is_future_key` false. A requested partition the broker does not have is left out, as
//! Apache Kafka does. With `--in-memory` the directory is named `in-memory` and its volume's
//! size is unknown (-1).

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use crate::handlers::partition_request::{Owned, PartitionRequests, Position};
use crate::model::cluster_view::TopicInfo;
use crate::protocol::messages::describe_log_dirs::{
    DescribeLogDirsPartition, DescribeLogDirsRequest, DescribeLogDirsResponse,
    DescribeLogDirsResult, DescribeLogDirsTopic,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

/// The log directory's name when nothing is on disk.
const IN_MEMORY_LOG_DIR: &str = "in-memory";

/// Answers DescribeLogDirs.
pub async fn handle(shard: &Rc<Shard>, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse {
    let view = shard.view.load();
    // Every partition to describe, sorted and without duplicates, with its topic.
    let mut wanted: BTreeMap<(Arc<str>, i32), Arc<TopicInfo>> = BTreeMap::new();
    match request.topics {
        None => {
            for topic in view.topics.values() {
                for partition in 0..topic.partitions() {
                    wanted.insert((topic.name().clone(), partition), topic.clone());
                }
            }
        }
        Some(topics) => {
            for requested in topics {
                let Some(topic) = view.topic(&requested.topic) else {
                    continue;
                };
                for partition in requested.partitions {
                    if (0..topic.partitions()).contains(&partition) {
                        wanted.insert((topic.name().clone(), partition), topic.clone());
                    }
                }
            }
        }
    }
    // A partition this broker does not serve (led elsewhere) is left out like a missing one.
    let mut requests = PartitionRequests::new(view.clone(), shard.router.shards());
    let mut names = Vec::with_capacity(wanted.len());
    for (slot, ((name, partition), topic)) in wanted.into_iter().enumerate() {
        let position = Position {
            topic: slot,
            partition: 0,
        };
        let _ = requests.add(position, &topic, partition, -1, ());
        names.push((name, partition));
    }
    let wanted = names;
    let mut sizes: Vec<Option<u64>> = vec![None; wanted.len()];
    for (position, size) in requests.run(shard, size_on_owner).await {
        if let (Some(entry), Ok(Some(size))) = (sizes.get_mut(position.topic), size) {
            *entry = Some(size);
        }
    }

    let mut topics: Vec<DescribeLogDirsTopic> = Vec::new();
    for ((name, partition), size) in wanted.iter().zip(sizes) {
        // A partition whose log cannot be opened (being deleted, poisoned) is not reported.
        let Some(size) = size else {
            continue;
        };
        let partition = DescribeLogDirsPartition {
            partition_index: *partition,
            partition_size: i64::try_from(size).unwrap_or(i64::MAX),
            offset_lag: 0,
            is_future_key: false,
        };
        match topics.last_mut() {
            Some(last) if last.name == **name => last.partitions.push(partition),
            _ => topics.push(DescribeLogDirsTopic {
                name: name.to_string(),
                partitions: vec![partition],
            }),
        }
    }

    let (log_dir, total_bytes, usable_bytes) = match &shard.config.data_dir {
        None => (IN_MEMORY_LOG_DIR.to_string(), -1, -1),
        Some(dir) => {
            let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
            let (total, usable) = match shard.logs.disk_space().await {
                Ok(Some(space)) => (
                    i64::try_from(space.total_bytes).unwrap_or(i64::MAX),
                    i64::try_from(space.usable_bytes).unwrap_or(i64::MAX),
                ),
                Ok(None) => (-1, -1),
                Err(error) => {
                    tracing::warn!(%error, "reading the data volume's size");
                    (-1, -1)
                }
            };
            (absolute.display().to_string(), total, usable)
        }
    };
    DescribeLogDirsResponse {
        results: vec![DescribeLogDirsResult {
            error_code: ErrorCode::None.code(),
            log_dir,
            topics,
            total_bytes,
            usable_bytes,
            is_cordoned: false,
        }],
        ..Default::default()
    }
}

async fn size_on_owner(shard: Rc<Shard>, items: Vec<Owned<()>>) -> Vec<(Position, Option<u64>)> {
    let mut sizes = Vec::with_capacity(items.len());
    for item in items {
        let size = item
            .partition
            .log(&shard)
            .await
            .ok()
            .map(|log| log.size_bytes());
        sizes.push((item.position, size));
    }
    sizes
}
