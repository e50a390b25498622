//! Kafka error codes the broker answers with (Kafka's `Errors` list; numbers are wire facts).

macro_rules! error_codes {
    ($( $(#[$doc:meta])* $variant:ident = $code:literal, $name:literal; )*) => {
        /// A Kafka error code, as carried in `error_code` fields.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(i16)]
        pub enum ErrorCode {
            $( $(#[$doc])* $variant = $code, )*
        }

        impl ErrorCode {
            /// Every code this enum knows.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant),*];

            /// The code as it goes on the wire.
            pub const fn code(self) -> i16 {
                self as i16
            }

            /// The code for a wire value, if known.
            pub const fn from_code(code: i16) -> Option<ErrorCode> {
                match code {
                    $( $code => Some(ErrorCode::$variant), )*
                    _ => None,
                }
            }

            /// Kafka's upper-case name of the code.
            pub const fn name(self) -> &'static str {
                match self {
                    $( ErrorCode::$variant => $name, )*
                }
            }
        }
    };
}

error_codes! {
    /// The server hit an unexpected error.
    UnknownServerError = -1, "UNKNOWN_SERVER_ERROR";
    /// No error.
    None = 0, "NONE";
    /// The requested offset is outside the range of offsets held for the partition.
    OffsetOutOfRange = 1, "OFFSET_OUT_OF_RANGE";
    /// A record batch failed its CRC check or is otherwise corrupt.
    CorruptMessage = 2, "CORRUPT_MESSAGE";
    /// This server does not host this topic-partition.
    UnknownTopicOrPartition = 3, "UNKNOWN_TOPIC_OR_PARTITION";
    /// The requested fetch size is invalid.
    InvalidFetchSize = 4, "INVALID_FETCH_SIZE";
    /// There is no leader for this topic-partition (leader election in progress).
    LeaderNotAvailable = 5, "LEADER_NOT_AVAILABLE";
    /// This server is not the leader (or follower) of the partition.
    NotLeaderOrFollower = 6, "NOT_LEADER_OR_FOLLOWER";
    /// The request timed out.
    RequestTimedOut = 7, "REQUEST_TIMED_OUT";
    /// The broker is not available.
    BrokerNotAvailable = 8, "BROKER_NOT_AVAILABLE";
    /// The replica is not available for the requested topic-partition.
    ReplicaNotAvailable = 9, "REPLICA_NOT_AVAILABLE";
    /// The request included a message larger than the server accepts.
    MessageTooLarge = 10, "MESSAGE_TOO_LARGE";
    /// The committed offset metadata is too large.
    OffsetMetadataTooLarge = 12, "OFFSET_METADATA_TOO_LARGE";
    /// The connection to another broker failed before its answer came.
    NetworkException = 13, "NETWORK_EXCEPTION";
    /// The coordinator is loading and cannot serve yet.
    CoordinatorLoadInProgress = 14, "COORDINATOR_LOAD_IN_PROGRESS";
    /// The coordinator is not available (also GROUP_COORDINATOR_NOT_AVAILABLE).
    CoordinatorNotAvailable = 15, "COORDINATOR_NOT_AVAILABLE";
    /// This is not the correct coordinator.
    NotCoordinator = 16, "NOT_COORDINATOR";
    /// The topic name is invalid.
    InvalidTopicException = 17, "INVALID_TOPIC_EXCEPTION";
    /// A produce request's record data is larger than the segment size.
    RecordListTooLarge = 18, "RECORD_LIST_TOO_LARGE";
    /// Fewer in-sync replicas than required.
    NotEnoughReplicas = 19, "NOT_ENOUGH_REPLICAS";
    /// Written, but to fewer in-sync replicas than required.
    NotEnoughReplicasAfterAppend = 20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND";
    /// The produce request's acks value is invalid.
    InvalidRequiredAcks = 21, "INVALID_REQUIRED_ACKS";
    /// The group generation id is not current.
    IllegalGeneration = 22, "ILLEGAL_GENERATION";
    /// The member's protocol type or protocols do not match the group's.
    InconsistentGroupProtocol = 23, "INCONSISTENT_GROUP_PROTOCOL";
    /// The group id is invalid.
    InvalidGroupId = 24, "INVALID_GROUP_ID";
    /// The coordinator does not know this member.
    UnknownMemberId = 25, "UNKNOWN_MEMBER_ID";
    /// The session timeout is outside the allowed range.
    InvalidSessionTimeout = 26, "INVALID_SESSION_TIMEOUT";
    /// The group is rebalancing; the member should rejoin.
    RebalanceInProgress = 27, "REBALANCE_IN_PROGRESS";
    /// The committed offset is invalid.
    InvalidCommitOffsetSize = 28, "INVALID_COMMIT_OFFSET_SIZE";
    /// Not authorized to access the topics.
    TopicAuthorizationFailed = 29, "TOPIC_AUTHORIZATION_FAILED";
    /// Not authorized to access the group.
    GroupAuthorizationFailed = 30, "GROUP_AUTHORIZATION_FAILED";
    /// Not authorized for the cluster.
    ClusterAuthorizationFailed = 31, "CLUSTER_AUTHORIZATION_FAILED";
    /// A record timestamp is out of the accepted range.
    InvalidTimestamp = 32, "INVALID_TIMESTAMP";
    /// The version of the API is not supported.
    UnsupportedVersion = 35, "UNSUPPORTED_VERSION";
    /// The topic already exists.
    TopicAlreadyExists = 36, "TOPIC_ALREADY_EXISTS";
    /// The number of partitions is invalid.
    InvalidPartitions = 37, "INVALID_PARTITIONS";
    /// The replication factor is invalid.
    InvalidReplicationFactor = 38, "INVALID_REPLICATION_FACTOR";
    /// The replica assignment is invalid.
    InvalidReplicaAssignment = 39, "INVALID_REPLICA_ASSIGNMENT";
    /// The configuration is invalid.
    InvalidConfig = 40, "INVALID_CONFIG";
    /// This is not the controller.
    NotController = 41, "NOT_CONTROLLER";
    /// The request is malformed or otherwise invalid.
    InvalidRequest = 42, "INVALID_REQUEST";
    /// The message format version does not support the request.
    UnsupportedForMessageFormat = 43, "UNSUPPORTED_FOR_MESSAGE_FORMAT";
    /// The request violates a configured policy.
    PolicyViolation = 44, "POLICY_VIOLATION";
    /// The broker received an out-of-order sequence number.
    OutOfOrderSequenceNumber = 45, "OUT_OF_ORDER_SEQUENCE_NUMBER";
    /// The broker received a duplicate sequence number.
    DuplicateSequenceNumber = 46, "DUPLICATE_SEQUENCE_NUMBER";
    /// The producer epoch is older than the current one.
    InvalidProducerEpoch = 47, "INVALID_PRODUCER_EPOCH";
    /// The transactional state does not allow the operation.
    InvalidTxnState = 48, "INVALID_TXN_STATE";
    /// The producer id does not match the transactional id.
    InvalidProducerIdMapping = 49, "INVALID_PRODUCER_ID_MAPPING";
    /// The transaction timeout is larger than allowed.
    InvalidTransactionTimeout = 50, "INVALID_TRANSACTION_TIMEOUT";
    /// Another transaction is being changed for this producer.
    ConcurrentTransactions = 51, "CONCURRENT_TRANSACTIONS";
    /// A transaction marker came from an older coordinator than the partition has seen.
    TransactionCoordinatorFenced = 52, "TRANSACTION_COORDINATOR_FENCED";
    /// Not authorized to use the transactional id.
    TransactionalIdAuthorizationFailed = 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED";
    /// Security features are disabled (no authorizer is configured).
    SecurityDisabled = 54, "SECURITY_DISABLED";
    /// Not attempted because another part of the request failed.
    OperationNotAttempted = 55, "OPERATION_NOT_ATTEMPTED";
    /// A disk error occurred on the broker while serving the request.
    KafkaStorageError = 56, "KAFKA_STORAGE_ERROR";
    /// The broker has no state for this producer id.
    UnknownProducerId = 59, "UNKNOWN_PRODUCER_ID";
    /// The group is not empty.
    NonEmptyGroup = 68, "NON_EMPTY_GROUP";
    /// The group does not exist.
    GroupIdNotFound = 69, "GROUP_ID_NOT_FOUND";
    /// The fetch session id was not found.
    FetchSessionIdNotFound = 70, "FETCH_SESSION_ID_NOT_FOUND";
    /// The fetch session epoch is invalid.
    InvalidFetchSessionEpoch = 71, "INVALID_FETCH_SESSION_EPOCH";
    /// Topic deletion is disabled.
    TopicDeletionDisabled = 73, "TOPIC_DELETION_DISABLED";
    /// The leader epoch in the request is older than the broker's.
    FencedLeaderEpoch = 74, "FENCED_LEADER_EPOCH";
    /// The leader epoch in the request is newer than the broker's.
    UnknownLeaderEpoch = 75, "UNKNOWN_LEADER_EPOCH";
    /// The requesting client does not support the compression type.
    UnsupportedCompressionType = 76, "UNSUPPORTED_COMPRESSION_TYPE";
    /// The leader's high watermark has not caught up yet.
    OffsetNotAvailable = 78, "OFFSET_NOT_AVAILABLE";
    /// The group member needs a member id to join.
    MemberIdRequired = 79, "MEMBER_ID_REQUIRED";
    /// The group is full.
    GroupMaxSizeReached = 81, "GROUP_MAX_SIZE_REACHED";
    /// A newer member with the same group instance id has joined.
    FencedInstanceId = 82, "FENCED_INSTANCE_ID";
    /// The group has committed offsets for a topic it is still subscribed to.
    GroupSubscribedToTopic = 86, "GROUP_SUBSCRIBED_TO_TOPIC";
    /// A record failed validation.
    InvalidRecord = 87, "INVALID_RECORD";
    /// Pending offsets for the partition are not yet stable.
    UnstableOffsetCommit = 88, "UNSTABLE_OFFSET_COMMIT";
    /// The throttling quota was exceeded.
    ThrottlingQuotaExceeded = 89, "THROTTLING_QUOTA_EXCEEDED";
    /// A newer producer with the same transactional id fenced this one.
    ProducerFenced = 90, "PRODUCER_FENCED";
    /// The topic id is unknown.
    UnknownTopicId = 100, "UNKNOWN_TOPIC_ID";
    /// The topic id does not match the topic name.
    InconsistentTopicId = 103, "INCONSISTENT_TOPIC_ID";
    /// The transaction coordinator has no state for the transactional id.
    TransactionalIdNotFound = 105, "TRANSACTIONAL_ID_NOT_FOUND";
    /// The fetch session hit a topic id error.
    FetchSessionTopicIdError = 106, "FETCH_SESSION_TOPIC_ID_ERROR";
    /// The member epoch is fenced by the group coordinator.
    FencedMemberEpoch = 110, "FENCED_MEMBER_EPOCH";
    /// The instance id is still used by another member.
    UnreleasedInstanceId = 111, "UNRELEASED_INSTANCE_ID";
    /// The assignor is not supported by the group.
    UnsupportedAssignor = 112, "UNSUPPORTED_ASSIGNOR";
    /// The member epoch is stale.
    StaleMemberEpoch = 113, "STALE_MEMBER_EPOCH";
    /// The transaction cannot go on; the client can abort it and keep its transactional id.
    TransactionAbortable = 120, "TRANSACTION_ABORTABLE";
    /// A regular expression in the request is not valid.
    InvalidRegularExpression = 128, "INVALID_REGULAR_EXPRESSION";
}

impl ErrorCode {
    /// Kafka's older name for [`ErrorCode::CoordinatorNotAvailable`].
    pub const GROUP_COORDINATOR_NOT_AVAILABLE: ErrorCode = ErrorCode::CoordinatorNotAvailable;
}

impl From<ErrorCode> for i16 {
    fn from(code: ErrorCode) -> i16 {
        code.code()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_code(code.code()), Some(*code));
        }
        assert_eq!(ErrorCode::from_code(1000), None);
        assert_eq!(ErrorCode::UnsupportedVersion.code(), 35);
        assert_eq!(ErrorCode::GROUP_COORDINATOR_NOT_AVAILABLE.code(), 15);
    }
}
