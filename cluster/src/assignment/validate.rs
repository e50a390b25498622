//! Turns the file's plain form into a checked [`Assignment`]: every cross-reference in the
//! file is checked here, once, so nothing downstream has to.

use std::collections::BTreeMap;

use super::error::AssignmentError;
use super::file_form::AssignmentFile;
use super::{Assignment, BrokerEndpoint, PartitionLeader, TopicAssignment, FORMAT};
use crate::ids::{
    AssignmentVersion, BrokerId, ControllerEpoch, GroupId, LeaderEpoch, TopicId, TopicName,
};

/// Checks `file` and builds the assignment it describes.
pub(super) fn validate(file: AssignmentFile) -> Result<Assignment, AssignmentError> {
    if file.format != FORMAT {
        return Err(AssignmentError::UnknownFormat(file.format));
    }
    let brokers = validate_brokers(&file)?;
    let mut partitions = file.partitions;
    let mut topics = BTreeMap::new();
    let mut ids: BTreeMap<TopicId, String> = BTreeMap::new();
    for (name, topic) in file.topics {
        let topic_name = TopicName::new(&name).map_err(|reason| AssignmentError::BadTopicName {
            name: name.clone(),
            reason,
        })?;
        let id = TopicId::parse(&topic.id).map_err(|reason| AssignmentError::BadTopicId {
            topic: name.clone(),
            id: topic.id.clone(),
            reason,
        })?;
        if let Some(first) = ids.insert(id, name.clone()) {
            return Err(AssignmentError::DuplicateTopicId {
                id: topic.id,
                first,
                second: name,
            });
        }
        if topic.partitions < 1 {
            return Err(AssignmentError::BadPartitionCount {
                topic: name,
                count: topic.partitions,
            });
        }
        let leaders = partitions
            .remove(&name)
            .ok_or_else(|| AssignmentError::TopicWithoutLeaders(name.clone()))?;
        if leaders.len() != topic.partitions as usize {
            return Err(AssignmentError::PartitionCountMismatch {
                topic: name,
                declared: topic.partitions,
                listed: leaders.len(),
            });
        }
        let mut checked = Vec::with_capacity(leaders.len());
        for (partition, leader) in leaders.into_iter().enumerate() {
            let partition = partition as i32;
            if !brokers.contains_key(&BrokerId(leader.leader)) {
                return Err(AssignmentError::UnknownLeader {
                    topic: name,
                    partition,
                    leader: leader.leader,
                });
            }
            if leader.leader_epoch < 0 {
                return Err(AssignmentError::NegativeLeaderEpoch {
                    topic: name,
                    partition,
                    epoch: leader.leader_epoch,
                });
            }
            checked.push(PartitionLeader {
                leader: BrokerId(leader.leader),
                leader_epoch: LeaderEpoch(leader.leader_epoch),
            });
        }
        topics.insert(
            topic_name,
            TopicAssignment {
                id,
                configs: topic.configs,
                partitions: checked,
            },
        );
    }
    if let Some(unknown) = partitions.into_keys().next() {
        return Err(AssignmentError::LeadersOfUnknownTopic(unknown));
    }
    let mut groups = BTreeMap::new();
    for (group, broker) in file.consumer_groups {
        if !brokers.contains_key(&BrokerId(broker)) {
            return Err(AssignmentError::UnknownGroupBroker { group, broker });
        }
        groups.insert(GroupId::new(&group), BrokerId(broker));
    }
    Ok(Assignment {
        controller_epoch: ControllerEpoch(file.controller_epoch),
        version: AssignmentVersion(file.assignment_version),
        brokers,
        topics,
        groups,
    })
}

fn validate_brokers(
    file: &AssignmentFile,
) -> Result<BTreeMap<BrokerId, BrokerEndpoint>, AssignmentError> {
    let mut brokers = BTreeMap::new();
    for broker in &file.brokers {
        if broker.id < 0 {
            return Err(AssignmentError::NegativeBrokerId(broker.id));
        }
        let id = BrokerId(broker.id);
        if broker.host.trim().is_empty() {
            return Err(AssignmentError::BadEndpoint {
                broker: id,
                reason: "empty host",
            });
        }
        if broker.port == 0 {
            return Err(AssignmentError::BadEndpoint {
                broker: id,
                reason: "port 0",
            });
        }
        let endpoint = BrokerEndpoint {
            id,
            host: broker.host.clone(),
            port: broker.port,
        };
        if brokers.insert(id, endpoint).is_some() {
            return Err(AssignmentError::DuplicateBroker(id));
        }
    }
    Ok(brokers)
}
