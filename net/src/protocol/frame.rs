//! Request and response framing.
//!
//! A frame on the wire is a 4-byte big-endian size followed by that many bytes. The decoders
//! here take the bytes after the size (the connection reads and caps the size itself); the
//! encoders return whole frames, size included, as a list of buffers for vectored writes.
//!
//! Request header v1: api_key i16, api_version i16, correlation_id i32, client_id nullable
//! string (always the non-compact form); v2 adds tagged fields. v2 is used exactly when the
//! request version is flexible. Response header v0: correlation_id; v1 adds tagged fields and is
//! used when the response version is flexible — except for ApiVersions, always v0, so a client
//! can read the answer whatever version it asked for.

use bytes::{Buf, Bytes};

use super::error::{DecodeError, FrameError, RequestIds};
use super::messages::*;
use super::types::Ctx;
use super::versions::{self, ApiRange};
use super::wire::{read_i32, read_length, read_slice, read_uvarint, Encoder};
use super::{ApiMessage, ErrorCode};

/// A decoded request header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeader {
    /// API key.
    pub api_key: i16,
    /// API version.
    pub api_version: i16,
    /// Correlation id, echoed in the response.
    pub correlation_id: i32,
    /// Client id, or null.
    pub client_id: Option<String>,
}

impl RequestHeader {
    /// Api key, version and correlation id.
    pub fn ids(&self) -> RequestIds {
        RequestIds {
            api_key: self.api_key,
            api_version: self.api_version,
            correlation_id: self.correlation_id,
        }
    }

    /// Writes the header in version 1 or, when `flexible`, 2.
    pub fn encode(&self, enc: &mut Encoder, flexible: bool) {
        enc.put_i16(self.api_key);
        enc.put_i16(self.api_version);
        enc.put_i32(self.correlation_id);
        // The client id keeps its non-compact form even in header v2.
        match &self.client_id {
            Some(id) => {
                enc.put_length(Some(id.len()), false, true);
                enc.put_slice(id.as_bytes());
            }
            None => enc.put_length(None, false, true),
        }
        if flexible {
            enc.put_uvarint(0);
        }
    }
}

/// Api key, version and correlation id of a frame (bytes after the size prefix), if it is
/// long enough to hold them.
pub fn peek_ids(frame: &[u8]) -> Option<RequestIds> {
    let head: &[u8; 8] = frame.get(..8)?.try_into().ok()?;
    Some(RequestIds {
        api_key: i16::from_be_bytes([head[0], head[1]]),
        api_version: i16::from_be_bytes([head[2], head[3]]),
        correlation_id: i32::from_be_bytes([head[4], head[5], head[6], head[7]]),
    })
}

fn skip_tagged_fields(buf: &mut Bytes) -> Result<(), DecodeError> {
    let count = read_uvarint(buf)?;
    for _ in 0..count {
        read_uvarint(buf)?;
        let size = read_uvarint(buf)? as usize;
        read_slice(buf, size, "tagged field")?;
    }
    Ok(())
}

fn decode_header_rest(
    buf: &mut Bytes,
    ids: RequestIds,
    flexible: bool,
) -> Result<RequestHeader, DecodeError> {
    let client_id = match read_length(buf, false, true, "client id")? {
        Some(len) => {
            let raw = read_slice(buf, len, "client id")?;
            Some(
                std::str::from_utf8(&raw)
                    .map_err(|_| DecodeError::BadUtf8)?
                    .to_owned(),
            )
        }
        None => None,
    };
    if flexible {
        skip_tagged_fields(buf)?;
    }
    Ok(RequestHeader {
        api_key: ids.api_key,
        api_version: ids.api_version,
        correlation_id: ids.correlation_id,
        client_id,
    })
}

/// Decodes a request frame (the bytes after the size prefix) into its header and body.
///
/// Unknown APIs and versions outside [`SUPPORTED_APIS`] are rejected before the body is read;
/// every error except [`FrameError::TooShort`] carries the request's ids
/// ([`FrameError::ids`]) so the broker can answer under the right correlation id.
pub fn decode_request(mut frame: Bytes) -> Result<(RequestHeader, Request), FrameError> {
    let ids = peek_ids(&frame).ok_or(FrameError::TooShort(frame.len()))?;
    let range = versions::lookup(ids.api_key).ok_or(FrameError::UnknownApi(ids))?;
    if !range.supports(ids.api_version) {
        return Err(FrameError::UnsupportedVersion(ids));
    }
    frame.advance(8);
    let flexible = versions::request_header_version(range, ids.api_version) == 2;
    let header = decode_header_rest(&mut frame, ids, flexible)
        .map_err(|source| FrameError::Header { ids, source })?;
    match Request::decode_body(ids.api_key, ids.api_version, &mut frame) {
        Ok(request) => Ok((header, request)),
        Err(source) => Err(FrameError::Body {
            header: Box::new(header),
            source,
        }),
    }
}

/// Encodes a whole response frame: size prefix, response header, body.
///
/// Record data in the body stays in its own chunks; everything else is in shared slices of one
/// buffer. `version` must be the request's (served) version.
pub fn encode_response<R: ApiMessage>(correlation_id: i32, version: i16, body: &R) -> Vec<Bytes> {
    let mut enc = Encoder::with_capacity(256);
    enc.put_i32(0);
    enc.put_i32(correlation_id);
    let flexible_header = R::API_KEY != api_versions::API_VERSIONS_KEY && R::is_flexible(version);
    if flexible_header {
        enc.put_uvarint(0);
    }
    body.encode_body(&mut enc, version);
    let size = i32::try_from(enc.len() - 4).unwrap_or(i32::MAX);
    enc.patch_i32(0, size);
    enc.into_chunks()
}

/// Encodes a whole request frame (client side; used by tests and tools).
pub fn encode_request<R: ApiMessage>(header: &RequestHeader, body: &R) -> Vec<Bytes> {
    let mut enc = Encoder::with_capacity(256);
    enc.put_i32(0);
    header.encode(&mut enc, R::is_flexible(header.api_version));
    body.encode_body(&mut enc, header.api_version);
    let size = i32::try_from(enc.len() - 4).unwrap_or(i32::MAX);
    enc.patch_i32(0, size);
    enc.into_chunks()
}

/// Decodes a response frame (the bytes after the size prefix) for a request of `api_key` at
/// `version` (client side; used by tests and tools). Returns the correlation id and the body.
pub fn decode_response(
    api_key: i16,
    version: i16,
    mut frame: Bytes,
) -> Result<(i32, Response), DecodeError> {
    let range =
        versions::lookup(api_key).ok_or(DecodeError::UnsupportedVersion { api_key, version })?;
    let correlation_id = read_i32(&mut frame)?;
    if versions::response_header_version(range, version) == 1 {
        skip_tagged_fields(&mut frame)?;
    }
    let body = Response::decode_body(api_key, version, &mut frame)?;
    Ok((correlation_id, body))
}

/// Decodes a response frame (the bytes after the size prefix) whose body is an `R` at
/// `version` (client side: the inter-broker client, which knows the type it waits for).
/// Returns the correlation id and the body; the header is v0, or v1 when `version` is
/// flexible, except for ApiVersions (always v0).
pub fn decode_response_as<R: ApiMessage>(
    version: i16,
    mut frame: Bytes,
) -> Result<(i32, R), DecodeError> {
    let correlation_id = read_i32(&mut frame)?;
    if R::API_KEY != api_versions::API_VERSIONS_KEY && R::is_flexible(version) {
        skip_tagged_fields(&mut frame)?;
    }
    let body = R::decode_body(&mut frame, version)?;
    Ok((correlation_id, body))
}

/// The ApiVersions answer to a client that asked for an ApiVersions version newer than served:
/// a v0 body with UNSUPPORTED_VERSION and the served ranges, under a v0 header, so the client can
/// retry with a version it finds there.
pub fn api_versions_fallback_response(correlation_id: i32) -> Vec<Bytes> {
    let body = api_versions::ApiVersionsResponse {
        error_code: ErrorCode::UnsupportedVersion.code(),
        api_keys: api_versions::served_api_versions(),
        ..Default::default()
    };
    encode_response(correlation_id, 0, &body)
}

/// Reads a body of type `T` after checking the version is served.
fn decode_as<T: ApiMessage>(buf: &mut Bytes, version: i16) -> Result<T, DecodeError> {
    T::decode_body(buf, version)
}

/// Encodes `body` into `enc` at `version`.
fn encode_as<T: ApiMessage>(body: &T, enc: &mut Encoder, version: i16) {
    body.encode_body(enc, version)
}

macro_rules! apis {
    ($( $variant:ident => $req:ty, $resp:ty; )*) => {
        /// Every served API and its versions, from the request declarations.
        pub const SUPPORTED_APIS: &[ApiRange] = &[$(
            ApiRange {
                api_key: <$req as ApiMessage>::API_KEY,
                min_version: <$req as ApiMessage>::MIN_VERSION,
                max_version: <$req as ApiMessage>::MAX_VERSION,
                first_flexible: <$req as ApiMessage>::FIRST_FLEXIBLE,
            },
        )*];

        /// A decoded request body.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Request {
            $(
                #[allow(missing_docs)]
                $variant($req),
            )*
        }

        /// A response body (the broker usually encodes the concrete type directly with
        /// [`encode_response`]).
        #[derive(Debug, Clone, PartialEq)]
        pub enum Response {
            $(
                #[allow(missing_docs)]
                $variant($resp),
            )*
        }

        impl Request {
            /// API key of this request.
            pub fn api_key(&self) -> i16 {
                match self {
                    $( Request::$variant(_) => <$req as ApiMessage>::API_KEY, )*
                }
            }

            /// Decodes the body of `api_key` at `version` (whole buffer; leftovers are an error).
            pub fn decode_body(
                api_key: i16,
                version: i16,
                buf: &mut Bytes,
            ) -> Result<Request, DecodeError> {
                $(
                    if api_key == <$req as ApiMessage>::API_KEY {
                        return <$req as ApiMessage>::decode_prefix(buf, version)
                            .map(Request::$variant);
                    }
                )*
                Err(DecodeError::UnsupportedVersion { api_key, version })
            }

            /// Encodes the body at `version`.
            pub fn encode_body(&self, enc: &mut Encoder, version: i16) {
                match self {
                    $( Request::$variant(body) => encode_as(body, enc, version), )*
                }
            }

            /// Encodes a whole request frame with `header` (its api key must match).
            pub fn encode_frame(&self, header: &RequestHeader) -> Vec<Bytes> {
                match self {
                    $( Request::$variant(body) => encode_request(header, body), )*
                }
            }
        }

        impl Response {
            /// API key of this response.
            pub fn api_key(&self) -> i16 {
                match self {
                    $( Response::$variant(_) => <$resp as ApiMessage>::API_KEY, )*
                }
            }

            /// Decodes the body of `api_key` at `version` (whole buffer; leftovers are an error).
            pub fn decode_body(
                api_key: i16,
                version: i16,
                buf: &mut Bytes,
            ) -> Result<Response, DecodeError> {
                $(
                    if api_key == <$resp as ApiMessage>::API_KEY {
                        return decode_as::<$resp>(buf, version).map(Response::$variant);
                    }
                )*
                Err(DecodeError::UnsupportedVersion { api_key, version })
            }

            /// Encodes the body at `version`.
            pub fn encode_body(&self, enc: &mut Encoder, version: i16) {
                match self {
                    $( Response::$variant(body) => encode_as(body, enc, version), )*
                }
            }

            /// Encodes a whole response frame.
            pub fn encode_frame(&self, correlation_id: i32, version: i16) -> Vec<Bytes> {
                match self {
                    $( Response::$variant(body) => encode_response(correlation_id, version, body), )*
                }
            }
        }

        /// A sample request and response of `api_key` at `version` (see
        /// [`Sample`](super::sample::Sample)); `None` if the API is not served.
        pub fn sample_pair(
            api_key: i16,
            version: i16,
            rng: &mut super::sample::SampleRng,
        ) -> Option<(Request, Response)> {
            use super::sample::Sample;
            $(
                if api_key == <$req as ApiMessage>::API_KEY {
                    let req_ctx = Ctx::new(version, <$req as ApiMessage>::FIRST_FLEXIBLE);
                    let resp_ctx = Ctx::new(version, <$resp as ApiMessage>::FIRST_FLEXIBLE);
                    return Some((
                        Request::$variant(<$req>::sample(rng, req_ctx)),
                        Response::$variant(<$resp>::sample(rng, resp_ctx)),
                    ));
                }
            )*
            None
        }
    };
}

apis! {
    Produce => produce::ProduceRequest, produce::ProduceResponse;
    Fetch => fetch::FetchRequest, fetch::FetchResponse;
    ListOffsets => list_offsets::ListOffsetsRequest, list_offsets::ListOffsetsResponse;
    Metadata => metadata::MetadataRequest, metadata::MetadataResponse;
    ApiVersions => api_versions::ApiVersionsRequest, api_versions::ApiVersionsResponse;
    CreateTopics => create_topics::CreateTopicsRequest, create_topics::CreateTopicsResponse;
    DeleteTopics => delete_topics::DeleteTopicsRequest, delete_topics::DeleteTopicsResponse;
    DeleteRecords => delete_records::DeleteRecordsRequest, delete_records::DeleteRecordsResponse;
    InitProducerId => init_producer_id::InitProducerIdRequest,
        init_producer_id::InitProducerIdResponse;
    OffsetForLeaderEpoch => offset_for_leader_epoch::OffsetForLeaderEpochRequest,
        offset_for_leader_epoch::OffsetForLeaderEpochResponse;
    DescribeConfigs => describe_configs::DescribeConfigsRequest,
        describe_configs::DescribeConfigsResponse;
    CreatePartitions => create_partitions::CreatePartitionsRequest,
        create_partitions::CreatePartitionsResponse;
    AlterConfigs => alter_configs::AlterConfigsRequest, alter_configs::AlterConfigsResponse;
    IncrementalAlterConfigs => incremental_alter_configs::IncrementalAlterConfigsRequest,
        incremental_alter_configs::IncrementalAlterConfigsResponse;
    DescribeCluster => describe_cluster::DescribeClusterRequest,
        describe_cluster::DescribeClusterResponse;
    OffsetCommit => offset_commit::OffsetCommitRequest, offset_commit::OffsetCommitResponse;
    OffsetFetch => offset_fetch::OffsetFetchRequest, offset_fetch::OffsetFetchResponse;
    FindCoordinator => find_coordinator::FindCoordinatorRequest,
        find_coordinator::FindCoordinatorResponse;
    JoinGroup => join_group::JoinGroupRequest, join_group::JoinGroupResponse;
    Heartbeat => heartbeat::HeartbeatRequest, heartbeat::HeartbeatResponse;
    LeaveGroup => leave_group::LeaveGroupRequest, leave_group::LeaveGroupResponse;
    SyncGroup => sync_group::SyncGroupRequest, sync_group::SyncGroupResponse;
    DescribeGroups => describe_groups::DescribeGroupsRequest,
        describe_groups::DescribeGroupsResponse;
    ListGroups => list_groups::ListGroupsRequest, list_groups::ListGroupsResponse;
    DeleteGroups => delete_groups::DeleteGroupsRequest, delete_groups::DeleteGroupsResponse;
    OffsetDelete => offset_delete::OffsetDeleteRequest, offset_delete::OffsetDeleteResponse;
    ConsumerGroupHeartbeat => consumer_group_heartbeat::ConsumerGroupHeartbeatRequest,
        consumer_group_heartbeat::ConsumerGroupHeartbeatResponse;
    ConsumerGroupDescribe => consumer_group_describe::ConsumerGroupDescribeRequest,
        consumer_group_describe::ConsumerGroupDescribeResponse;
    DescribeAcls => describe_acls::DescribeAclsRequest, describe_acls::DescribeAclsResponse;
    CreateAcls => create_acls::CreateAclsRequest, create_acls::CreateAclsResponse;
    DeleteAcls => delete_acls::DeleteAclsRequest, delete_acls::DeleteAclsResponse;
    DescribeLogDirs => describe_log_dirs::DescribeLogDirsRequest,
        describe_log_dirs::DescribeLogDirsResponse;
    ListPartitionReassignments => list_partition_reassignments::ListPartitionReassignmentsRequest,
        list_partition_reassignments::ListPartitionReassignmentsResponse;
    DescribeProducers => describe_producers::DescribeProducersRequest,
        describe_producers::DescribeProducersResponse;
    AddPartitionsToTxn => add_partitions_to_txn::AddPartitionsToTxnRequest,
        add_partitions_to_txn::AddPartitionsToTxnResponse;
    AddOffsetsToTxn => add_offsets_to_txn::AddOffsetsToTxnRequest,
        add_offsets_to_txn::AddOffsetsToTxnResponse;
    EndTxn => end_txn::EndTxnRequest, end_txn::EndTxnResponse;
    WriteTxnMarkers => write_txn_markers::WriteTxnMarkersRequest,
        write_txn_markers::WriteTxnMarkersResponse;
    TxnOffsetCommit => txn_offset_commit::TxnOffsetCommitRequest,
        txn_offset_commit::TxnOffsetCommitResponse;
    DescribeTransactions => describe_transactions::DescribeTransactionsRequest,
        describe_transactions::DescribeTransactionsResponse;
    ListTransactions => list_transactions::ListTransactionsRequest,
        list_transactions::ListTransactionsResponse;
}
