//! Routes a decoded request to its handler and encodes the response frame.

use std::net::SocketAddr;
use std::rc::Rc;

use bytes::Bytes;

use crate::handlers;
use crate::protocol::{Request, RequestHeader, Response};
use crate::shard::Shard;

/// Whether the broker handles `api_key` (the codec has already gated the version).
pub fn is_served(api_key: i16, _api_version: i16) -> bool {
    handlers::api_versions::is_served(api_key)
}

/// Whether the broker accepts a decoded request at all; Kafka refuses to parse some that the
/// codec can read (ACL filters naming UNKNOWN), and the connection closes on those.
pub fn is_well_formed(request: &Request) -> bool {
    handlers::acl_requests::is_well_formed(request)
}

/// The ApiVersions answer for a client asking for a newer ApiVersions than served.
pub fn api_versions_fallback(correlation_id: i32) -> Vec<Bytes> {
    handlers::api_versions::fallback(correlation_id)
}

/// Handles one request; `None` when no response is sent (Produce with acks=0).
pub async fn handle(
    shard: &Rc<Shard>,
    header: RequestHeader,
    request: Request,
    peer: Option<SocketAddr>,
) -> Option<Vec<Bytes>> {
    let version = header.api_version;
    let client_id = || header.client_id.clone().unwrap_or_default();
    let client_host = || peer.map(|p| format!("/{}", p.ip())).unwrap_or_default();
    let response = match request {
        Request::ApiVersions(r) => Response::ApiVersions(handlers::api_versions::handle(r)),
        Request::Metadata(r) => {
            Response::Metadata(handlers::metadata::handle(shard, r, version).await)
        }
        Request::Produce(r) => {
            let acks = r.acks;
            let response = handlers::produce::handle(shard, r, version).await;
            if acks == 0 {
                return None;
            }
            Response::Produce(response)
        }
        Request::Fetch(r) => Response::Fetch(handlers::fetch::handle(shard, r, version).await),
        Request::ListOffsets(r) => {
            Response::ListOffsets(handlers::list_offsets::handle(shard, r).await)
        }
        Request::CreateTopics(r) => {
            Response::CreateTopics(handlers::create_topics::handle(shard, r).await)
        }
        Request::DeleteTopics(r) => {
            Response::DeleteTopics(handlers::delete_topics::handle(shard, r, version).await)
        }
        Request::CreatePartitions(r) => {
            Response::CreatePartitions(handlers::create_partitions::handle(shard, r).await)
        }
        Request::DescribeConfigs(r) => {
            Response::DescribeConfigs(handlers::describe_configs::handle(shard, r))
        }
        Request::AlterConfigs(r) => {
            Response::AlterConfigs(handlers::alter_configs::handle(shard, r).await)
        }
        Request::IncrementalAlterConfigs(r) => Response::IncrementalAlterConfigs(
            handlers::incremental_alter_configs::handle(shard, r).await,
        ),
        Request::DescribeCluster(r) => {
            Response::DescribeCluster(handlers::describe_cluster::handle(shard, r))
        }
        Request::DeleteRecords(r) => {
            Response::DeleteRecords(handlers::delete_records::handle(shard, r).await)
        }
        Request::InitProducerId(r) => {
            Response::InitProducerId(handlers::init_producer_id::handle(shard, r).await)
        }
        Request::OffsetForLeaderEpoch(r) => Response::OffsetForLeaderEpoch(
            handlers::offset_for_leader_epoch::handle(shard, r).await,
        ),
        Request::FindCoordinator(r) => {
            Response::FindCoordinator(handlers::find_coordinator::handle(shard, r, version).await)
        }
        Request::JoinGroup(r) => Response::JoinGroup(
            handlers::join_group::handle(shard, r, version, client_id(), client_host()).await,
        ),
        Request::SyncGroup(r) => Response::SyncGroup(handlers::sync_group::handle(shard, r).await),
        Request::Heartbeat(r) => Response::Heartbeat(handlers::heartbeat::handle(shard, r).await),
        Request::LeaveGroup(r) => {
            Response::LeaveGroup(handlers::leave_group::handle(shard, r, version).await)
        }
        Request::OffsetCommit(r) => {
            Response::OffsetCommit(handlers::offset_commit::handle(shard, r, version).await)
        }
        Request::OffsetFetch(r) => {
            Response::OffsetFetch(handlers::offset_fetch::handle(shard, r, version).await)
        }
        Request::ListGroups(r) => {
            Response::ListGroups(handlers::list_groups::handle(shard, r).await)
        }
        Request::DescribeGroups(r) => {
            Response::DescribeGroups(handlers::describe_groups::handle(shard, r, version).await)
        }
        Request::DeleteGroups(r) => {
            Response::DeleteGroups(handlers::delete_groups::handle(shard, r).await)
        }
        Request::OffsetDelete(r) => {
            Response::OffsetDelete(handlers::offset_delete::handle(shard, r).await)
        }
        Request::ConsumerGroupHeartbeat(r) => Response::ConsumerGroupHeartbeat(
            handlers::consumer_group_heartbeat::handle(
                shard,
                r,
                version,
                client_id(),
                client_host(),
            )
            .await,
        ),
        Request::DescribeAcls(r) => Response::DescribeAcls(handlers::describe_acls::handle(r)),
        Request::CreateAcls(r) => Response::CreateAcls(handlers::create_acls::handle(r)),
        Request::DeleteAcls(r) => Response::DeleteAcls(handlers::delete_acls::handle(r)),
        Request::DescribeLogDirs(r) => {
            Response::DescribeLogDirs(handlers::describe_log_dirs::handle(shard, r).await)
        }
        Request::ListPartitionReassignments(r) => {
            Response::ListPartitionReassignments(handlers::list_partition_reassignments::handle(r))
        }
        Request::DescribeProducers(r) => {
            Response::DescribeProducers(handlers::describe_producers::handle(shard, r).await)
        }
        Request::ConsumerGroupDescribe(r) => Response::ConsumerGroupDescribe(
            handlers::consumer_group_describe::handle(shard, r).await,
        ),
        Request::WriteTxnMarkers(r) => {
            Response::WriteTxnMarkers(handlers::write_txn_markers::handle(shard, r).await)
        }
        // The codec reads these, the broker does not serve them (not in ApiVersions): the
        // connection refuses them before dispatch ([`is_served`]), so none gets here.
        Request::AddPartitionsToTxn(r) => Response::AddPartitionsToTxn(
            handlers::add_partitions_to_txn::handle(shard, r, version).await,
        ),
        Request::AddOffsetsToTxn(r) => {
            Response::AddOffsetsToTxn(handlers::add_offsets_to_txn::handle(shard, r).await)
        }
        Request::EndTxn(r) => Response::EndTxn(handlers::end_txn::handle(shard, r, version).await),
        Request::TxnOffsetCommit(r) => {
            Response::TxnOffsetCommit(handlers::txn_offset_commit::handle(shard, r, version).await)
        }
        Request::DescribeTransactions(r) => {
            Response::DescribeTransactions(handlers::describe_transactions::handle(shard, r).await)
        }
        Request::ListTransactions(r) => {
            Response::ListTransactions(handlers::list_transactions::handle(shard, r).await)
        }
    };
    Some(response.encode_frame(header.correlation_id, version))
}
