//! WriteTxnMarkers (key 27): what a transaction coordinator sends partition leaders. Generated
//! by `message!`.

use crate::protocol::macros::message;

message! {
    /// WriteTxnMarkers request.
    pub struct WriteTxnMarkersRequest (api_key 27, versions 1..=2, flexible 1) {
        /// The markers to write.
        markers: Vec<WritableTxnMarker>, v(0..);
    }

    /// One marker, for every partition listed.
    pub struct WritableTxnMarker {
        /// The producer id.
        producer_id: i64, v(0..);
        /// The producer epoch.
        producer_epoch: i16, v(0..);
        /// True for a commit marker, false for an abort.
        transaction_result: bool, v(0..);
        /// The partitions.
        topics: Vec<WritableTxnMarkerTopic>, v(0..);
        /// The coordinator's epoch.
        coordinator_epoch: i32, v(0..);
        /// The transaction version (1: V1, 2: V2) of the transaction ended (from v2).
        transaction_version: i8, v(2..);
    }

    /// Partitions of one topic.
    pub struct WritableTxnMarkerTopic {
        /// Topic name.
        name: String, v(0..);
        /// Partition indexes.
        partition_indexes: Vec<i32>, v(0..);
    }

    /// WriteTxnMarkers response.
    pub struct WriteTxnMarkersResponse (api_key 27, versions 1..=2, flexible 1) {
        /// Results per marker.
        markers: Vec<WritableTxnMarkerResult>, v(0..);
    }

    /// Results for one marker.
    pub struct WritableTxnMarkerResult {
        /// The producer id.
        producer_id: i64, v(0..);
        /// Results per topic.
        topics: Vec<WritableTxnMarkerTopicResult>, v(0..);
    }

    /// Results for one topic.
    pub struct WritableTxnMarkerTopicResult {
        /// Topic name.
        name: String, v(0..);
        /// Results per partition.
        partitions: Vec<WritableTxnMarkerPartitionResult>, v(0..);
    }

    /// Result for one partition.
    pub struct WritableTxnMarkerPartitionResult {
        /// Partition index.
        partition_index: i32, v(0..);
        /// Error code.
        error_code: i16, v(0..);
    }
}
