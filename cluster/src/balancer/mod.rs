//! The balancer: from the previous assignment (or none), the alive brokers, the topics and
//! the consumer groups, the next [`Assignment`]. Pure: the same request always gives the same
//! assignment.
//!
//! # What it decides
//!
//! - **Brokers**: the assignment lists exactly the alive brokers, with their endpoints.
//! - **Group coordinators** follow `__consumer_offsets` when the request has that topic (the
//!   controller always adds it, [`crate::internal_topics`]): a group's broker is the leader of
//!   its partition of it, as in Kafka. Without it they are spread on their own, as below.
//! - **Partition leadership** and **group coordinators** are each spread evenly over the
//!   alive brokers (loads at most one apart, for partitions and for groups separately) while
//!   moving as few as any even spread can ([`spread`]'s doc has the argument). In particular a
//!   broker's departure moves only its own partitions and groups, a join moves only what the
//!   joiner's share takes from the most loaded, and creating a topic or adding partitions
//!   moves nothing that was placed. Deleting a topic moves others only if the loads would
//!   otherwise be more than one apart, and then only what evens them.
//! - A partition stays with its previous leader when that leader is alive and the topic has
//!   the same id (a topic deleted and created again under one name is a new topic). A group's
//!   current broker is the one the previous assignment names, or for a group it does not name
//!   the fallback coordinator among its brokers (where requests go now), so naming a group
//!   for the first time does not move it.
//! - **Leader epochs** ([`leader_epochs`]): a partition keeps its epoch while its leader stays;
//!   a partition with a new leader, a new partition, or one whose epoch is not above its
//!   *floor* gets `max(previous + 1, floor + 1, first of this controller's range)`. The
//!   floors ([`BalanceRequest::epoch_floors`]) are what the controller knows beyond the
//!   previous assignment: a claim a broker reported that fenced its leader, a stale
//!   controller's file that gave the partition a higher epoch, the last epoch of a deleted
//!   topic's partition. So every leader change rises above every epoch the partition is known
//!   to have had, and epochs chosen under different controller epochs never meet.
//!
//! The result is built through the file's validator, so it always passes it (or the request
//! is refused with [`BalanceError::Invalid`]).

mod error;
pub mod leader_epochs;
mod spread;

use std::collections::{BTreeMap, BTreeSet};

pub use error::BalanceError;
pub use leader_epochs::{EpochRange, EPOCH_BITS_PER_CONTROLLER, MAX_CONTROLLER_EPOCH};

use crate::assignment::{
    Assignment, AssignmentFile, BrokerEndpoint, BrokerFile, PartitionFile, TopicFile, FORMAT,
};
use crate::ids::{
    AssignmentVersion, BrokerId, ControllerEpoch, GroupId, LeaderEpoch, TopicName, TopicPartition,
};
use crate::internal_topics::{offsets_partition, offsets_topic_name, OFFSETS_TOPIC};
use crate::placement::fallback_coordinator;
use crate::view::TopicInfo;

/// Everything the balancer decides from.
#[derive(Clone, Copy, Debug)]
pub struct BalanceRequest<'a> {
    /// The assignment to build on: the controller's own last one, or the file it found.
    pub previous: Option<&'a Assignment>,
    /// The epoch of the controller asking (stamped into the result; picks the epoch range).
    pub controller_epoch: ControllerEpoch,
    /// The version the result carries.
    pub version: AssignmentVersion,
    /// The alive brokers and their endpoints (by id; not empty).
    pub brokers: &'a BTreeMap<BrokerId, BrokerEndpoint>,
    /// Every topic, by name.
    pub topics: &'a BTreeMap<TopicName, TopicInfo>,
    /// Every consumer group to name.
    pub groups: &'a BTreeSet<GroupId>,
    /// Partitions that must get a leader epoch above the given one, whoever leads them.
    pub epoch_floors: &'a BTreeMap<TopicPartition, LeaderEpoch>,
}

/// The next assignment (see the module doc).
pub fn balance(request: &BalanceRequest<'_>) -> Result<Assignment, BalanceError> {
    if request.brokers.is_empty() {
        return Err(BalanceError::NoBrokers);
    }
    let range = EpochRange::of(request.controller_epoch)?;
    let alive: BTreeSet<BrokerId> = request.brokers.keys().copied().collect();
    let leaders = place_partitions(request, &alive);
    let coordinators = if request.topics.contains_key(OFFSETS_TOPIC) {
        coordinators_by_offsets_partition(request.groups, &leaders)
    } else {
        place_groups(request, &alive)
    };

    let mut partitions: BTreeMap<String, Vec<PartitionFile>> = BTreeMap::new();
    let mut topics: BTreeMap<String, TopicFile> = BTreeMap::new();
    for (name, topic) in request.topics {
        let previous = previous_topic(request.previous, name, topic);
        let mut entries = Vec::with_capacity(topic.partitions.max(0) as usize);
        for index in 0..topic.partitions {
            let partition = TopicPartition::new(name.clone(), index);
            let Some(&leader) = leaders.get(&partition) else {
                unreachable!("every partition of every topic is placed")
            };
            let before = previous.and_then(|t| t.partitions.get(index as usize).copied());
            let floor = request.epoch_floors.get(&partition).copied();
            let leader_epoch = match before {
                Some(before)
                    if before.leader == leader && floor.is_none_or(|f| before.leader_epoch > f) =>
                {
                    before.leader_epoch
                }
                _ => {
                    // A recreated topic's old epochs still count: its directory may hold
                    // their claims.
                    let old = request
                        .previous
                        .and_then(|p| p.leader(&partition))
                        .map(|p| p.leader_epoch);
                    range.next(&partition, old, floor)?
                }
            };
            entries.push(PartitionFile {
                leader: leader.0,
                leader_epoch: leader_epoch.0,
            });
        }
        partitions.insert(name.to_string(), entries);
        topics.insert(
            name.to_string(),
            TopicFile {
                id: topic.id.to_string(),
                partitions: topic.partitions,
                configs: topic.configs.clone(),
            },
        );
    }
    let file = AssignmentFile {
        format: FORMAT,
        controller_epoch: request.controller_epoch.0,
        assignment_version: request.version.0,
        brokers: request
            .brokers
            .values()
            .map(|b| BrokerFile {
                id: b.id.0,
                host: b.host.clone(),
                port: b.port,
            })
            .collect(),
        topics,
        partitions,
        consumer_groups: coordinators
            .into_iter()
            .map(|(group, broker)| (group.to_string(), broker.0))
            .collect(),
    };
    Ok(Assignment::try_from(file)?)
}

/// The previous assignment's topic of that name, if it is the same topic (same id).
fn previous_topic<'p>(
    previous: Option<&'p Assignment>,
    name: &TopicName,
    topic: &TopicInfo,
) -> Option<&'p crate::assignment::TopicAssignment> {
    previous?.topics().get(name).filter(|t| t.id == topic.id)
}

fn place_partitions(
    request: &BalanceRequest<'_>,
    alive: &BTreeSet<BrokerId>,
) -> BTreeMap<TopicPartition, BrokerId> {
    let mut kept: BTreeMap<BrokerId, Vec<TopicPartition>> = BTreeMap::new();
    let mut orphans = Vec::new();
    for (name, topic) in request.topics {
        let previous = previous_topic(request.previous, name, topic);
        for index in 0..topic.partitions {
            let partition = TopicPartition::new(name.clone(), index);
            let leader = previous
                .and_then(|t| t.partitions.get(index as usize))
                .map(|p| p.leader)
                .filter(|leader| alive.contains(leader));
            match leader {
                Some(leader) => kept.entry(leader).or_default().push(partition),
                None => orphans.push(partition),
            }
        }
    }
    spread::spread(alive, kept, orphans, |p: &TopicPartition| p.topic.clone())
}

/// Each group's coordinator when `__consumer_offsets` is placed: the leader of the group's
/// partition of it (so the groups spread as evenly as that topic's partitions do).
fn coordinators_by_offsets_partition(
    groups: &BTreeSet<GroupId>,
    leaders: &BTreeMap<TopicPartition, BrokerId>,
) -> BTreeMap<GroupId, BrokerId> {
    let topic = offsets_topic_name();
    groups
        .iter()
        .filter_map(|group| {
            let partition = TopicPartition::new(topic.clone(), offsets_partition(group.as_str()));
            leaders
                .get(&partition)
                .map(|leader| (group.clone(), *leader))
        })
        .collect()
}

/// Groups spread evenly on their own (an assignment without `__consumer_offsets`).
fn place_groups(
    request: &BalanceRequest<'_>,
    alive: &BTreeSet<BrokerId>,
) -> BTreeMap<GroupId, BrokerId> {
    let mut kept: BTreeMap<BrokerId, Vec<GroupId>> = BTreeMap::new();
    let mut orphans = Vec::new();
    for group in request.groups {
        let current = request.previous.and_then(|previous| {
            previous
                .groups()
                .get(group)
                .copied()
                .or_else(|| fallback_coordinator(group, previous.brokers().keys().copied()))
        });
        match current.filter(|broker| alive.contains(broker)) {
            Some(broker) => kept.entry(broker).or_default().push(group.clone()),
            None => orphans.push(group.clone()),
        }
    }
    spread::spread(alive, kept, orphans, |_: &GroupId| ())
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod properties;
