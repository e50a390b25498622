//! The coordinator's side of one round: routing each partition by the current view, writing
//! the ones led here, and sending the others to their leaders as WriteTxnMarkers.
//!
//! The request is WriteTxnMarkers v2 (every kaas broker serves v1 and v2): v2 carries the
//! transaction version, which decides which producer epochs the leader accepts on the marker
//! (Kafka's coordinator sends its highest version too). One request per leader holds the one
//! marker with all that leader's partitions; the answer is read per partition under the
//! marker's producer id.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use kaas_cluster::ids::TopicName;

use super::rounds::MarkerAnswer;
use super::{write_here, MarkerEntry};
use crate::groups::offsets_topic;
use crate::model::cluster_view::ClusterView;
use crate::peers::{Endpoint, PeerClient};
use crate::protocol::messages::write_txn_markers::{
    WritableTxnMarker, WritableTxnMarkerTopic, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;
use crate::transactions::metadata::TopicPartition;

/// The WriteTxnMarkers version sent to other brokers.
pub const MARKER_REQUEST_VERSION: i16 = 2;
/// How long a leader has to answer (Kafka's `request.timeout.ms` default).
pub const MARKER_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a partition's marker goes this round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// This broker leads it.
    Here,
    /// Another broker leads it, listening there.
    Leader(Endpoint),
    /// The view names no leader to send to (no assignment yet, or a leader without an
    /// endpoint): wait for the next round.
    NoLeader,
    /// The view has no such topic or partition any more: nothing to write.
    TopicGone,
}

/// Where `partition`'s marker goes under `view`.
pub fn route(view: &ClusterView, partition: &TopicPartition) -> Route {
    let Some(cluster) = view.cluster.as_ref() else {
        // A cluster broker before its first assignment knows no topic, gone or not.
        return Route::NoLeader;
    };
    let leader = if offsets_topic::is_offsets_topic(&partition.topic) {
        if !(0..offsets_topic::PARTITIONS).contains(&partition.partition) {
            return Route::TopicGone;
        }
        if !offsets_topic::is_served(view) {
            return Route::NoLeader;
        }
        if !view.is_cluster() {
            return Route::Here;
        }
        cluster
            .offsets_leader(partition.partition)
            .map(|p| p.leader)
    } else {
        let Some(topic) = view.topic(&partition.topic) else {
            return Route::TopicGone;
        };
        if !(0..topic.partitions()).contains(&partition.partition) {
            return Route::TopicGone;
        }
        TopicName::new(&partition.topic).ok().and_then(|name| {
            let id = kaas_cluster::ids::TopicPartition::new(name, partition.partition);
            cluster.leader_of(&id).map(|p| p.leader)
        })
    };
    match leader {
        None => Route::NoLeader,
        Some(leader) if leader == cluster.this_broker() => Route::Here,
        Some(leader) => cluster
            .brokers()
            .get(&leader)
            .map_or(Route::NoLeader, |broker| {
                Route::Leader(Endpoint::new(broker.host.clone(), broker.port))
            }),
    }
}

/// One round: routes `pending` by the current view, writes what is led here, sends the rest
/// to their leaders (concurrently), and returns every partition's answer.
pub(super) async fn one_round(
    shard: &Rc<Shard>,
    entry: &MarkerEntry,
    pending: Vec<TopicPartition>,
) -> Vec<(TopicPartition, MarkerAnswer)> {
    let view = shard.view.load();
    let mut answers = Vec::with_capacity(pending.len());
    let mut here = Vec::new();
    let mut by_leader: BTreeMap<Endpoint, Vec<TopicPartition>> = BTreeMap::new();
    for partition in pending {
        match route(&view, &partition) {
            Route::Here => here.push(partition),
            Route::Leader(endpoint) => by_leader.entry(endpoint).or_default().push(partition),
            Route::NoLeader => answers.push((partition, MarkerAnswer::NoLeader)),
            Route::TopicGone => answers.push((partition, MarkerAnswer::TopicGone)),
        }
    }
    let local = async {
        if here.is_empty() {
            return Vec::new();
        }
        write_here(shard, &entry.with_partitions(here))
            .await
            .into_iter()
            .map(|(partition, code)| (partition, MarkerAnswer::Answered(code)))
            .collect()
    };
    let sent = futures_util::future::join_all(
        by_leader
            .into_iter()
            .map(|(endpoint, partitions)| send(&shard.peers, endpoint, entry, partitions)),
    );
    let (local, sent) = futures_util::future::join(local, sent).await;
    answers.extend(local);
    answers.extend(sent.into_iter().flatten());
    answers
}

/// Sends `entry` for `partitions` to the leader at `endpoint` and reads each partition's
/// answer.
async fn send(
    peers: &PeerClient,
    endpoint: Endpoint,
    entry: &MarkerEntry,
    partitions: Vec<TopicPartition>,
) -> Vec<(TopicPartition, MarkerAnswer)> {
    let request = WriteTxnMarkersRequest {
        markers: vec![to_wire(&entry.with_partitions(partitions.clone()))],
    };
    let answer = peers
        .call::<_, WriteTxnMarkersResponse>(
            &endpoint,
            MARKER_REQUEST_VERSION,
            &request,
            MARKER_REQUEST_TIMEOUT,
        )
        .await;
    match answer {
        Ok(response) => partitions
            .into_iter()
            .map(|partition| {
                let answer = answer_for(&response, entry.producer_id, &partition);
                (partition, answer)
            })
            .collect(),
        Err(error) => {
            tracing::warn!(%endpoint, %error, producer_id = entry.producer_id, "transaction markers not sent");
            partitions
                .into_iter()
                .map(|partition| (partition, MarkerAnswer::NoAnswer))
                .collect()
        }
    }
}

/// `partition`'s answer in a WriteTxnMarkers response, under `producer_id`.
pub fn answer_for(
    response: &WriteTxnMarkersResponse,
    producer_id: i64,
    partition: &TopicPartition,
) -> MarkerAnswer {
    let code = response
        .markers
        .iter()
        .filter(|marker| marker.producer_id == producer_id)
        .flat_map(|marker| &marker.topics)
        .filter(|topic| topic.name == partition.topic)
        .flat_map(|topic| &topic.partitions)
        .find(|answer| answer.partition_index == partition.partition)
        .map(|answer| answer.error_code);
    match code {
        None => MarkerAnswer::NoAnswer,
        Some(code) => ErrorCode::from_code(code)
            .map_or(MarkerAnswer::UnknownCode(code), MarkerAnswer::Answered),
    }
}

/// The WriteTxnMarkers marker of `entry`: its partitions grouped by topic, in order.
pub fn to_wire(entry: &MarkerEntry) -> WritableTxnMarker {
    let mut topics: Vec<WritableTxnMarkerTopic> = Vec::new();
    for partition in &entry.partitions {
        match topics
            .iter_mut()
            .find(|topic| topic.name == partition.topic)
        {
            Some(topic) => topic.partition_indexes.push(partition.partition),
            None => topics.push(WritableTxnMarkerTopic {
                name: partition.topic.clone(),
                partition_indexes: vec![partition.partition],
            }),
        }
    }
    WritableTxnMarker {
        producer_id: entry.producer_id,
        producer_epoch: entry.producer_epoch,
        transaction_result: entry.commit,
        topics,
        coordinator_epoch: entry.coordinator_epoch,
        transaction_version: entry.transaction_version,
    }
}

/// The entry a WriteTxnMarkers marker carries (each partition once).
pub fn from_wire(marker: &WritableTxnMarker) -> MarkerEntry {
    let partitions = marker
        .topics
        .iter()
        .flat_map(|topic| {
            topic
                .partition_indexes
                .iter()
                .map(|partition| TopicPartition::new(topic.name.clone(), *partition))
        })
        .collect();
    MarkerEntry {
        producer_id: marker.producer_id,
        producer_epoch: marker.producer_epoch,
        coordinator_epoch: marker.coordinator_epoch,
        commit: marker.transaction_result,
        transaction_version: marker.transaction_version,
        partitions: super::unique(partitions),
    }
}
