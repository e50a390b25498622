//! Produce (key 0): append record batches; with acks 1 or all, answer only once they are
//! fdatasync'd (without replication both mean "on the disk").
//!
//! A partition's records must be exactly one batch (Produce v3 and later, as Kafka checks).
//! The engine validates the batch (decompressing it when compressed) and stores the
//! producer's bytes; a topic whose `compression.type` names a codec has its batches
//! re-encoded in that codec first, on the owner shard. A refused batch gets the code Apache
//! Kafka gives for its fault ([`crate::handlers::batch_error_code`]), an error message, and
//! for a record that breaks a per-record rule the record's index in `record_errors`
//! ([`record_errors`] words the topic rules' answers: keys on compacted topics, timestamps).

mod record_errors;

use std::collections::BTreeSet;
use std::rc::Rc;

use bytes::Bytes;
use kaas_engine::batch::recompress::recompress_batches;
use kaas_engine::batch::{
    BatchError, BatchHeader, BATCH_LENGTH_POS, LOG_OVERHEAD, MIN_BATCH_LENGTH,
};
use kaas_engine::{EngineError, PartitionId};

use crate::groups::offsets_topic;
use crate::handlers::partition_request::{Owned, PartitionRequests, Position};
use crate::handlers::transaction_verification::{self, SupportedOperation, TransactionalWrite};
use crate::handlers::{error_code, now_ms, partition_error_code};
use crate::protocol::messages::produce::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, ProduceRequest, ProduceResponse,
    TopicProduceResponse,
};
use crate::protocol::ErrorCode;
use crate::shard::partition_error::PartitionError;
use crate::shard::Shard;
use crate::transactions::metadata::TopicPartition;

struct Input {
    records: Bytes,
    wait_for_flush: bool,
    /// A transactional batch's check with its coordinator, made on the owner shard in the
    /// partition's turn.
    transaction: Option<TransactionalWrite>,
}

#[derive(Default)]
struct Output {
    error: Option<ErrorCode>,
    message: Option<String>,
    record_errors: Vec<BatchIndexAndErrorMessage>,
    base_offset: i64,
    log_append_time: i64,
    log_start_offset: i64,
}

impl Output {
    /// A partition's answer carrying only `code`.
    fn failed(code: ErrorCode) -> Output {
        Output {
            error: Some(code),
            base_offset: -1,
            log_append_time: -1,
            log_start_offset: -1,
            ..Default::default()
        }
    }
}

/// Answers Produce at `version` (the caller sends nothing back for acks=0).
pub async fn handle(shard: &Rc<Shard>, request: ProduceRequest, version: i16) -> ProduceResponse {
    let view = shard.view.load();
    let refuse_all = if !matches!(request.acks, -1..=1) {
        Some(ErrorCode::InvalidRequiredAcks)
    } else if request.transactional_id.is_none() && has_transactional_batch(&request) {
        // Kafka: transactional records need the request's transactional id (it authorizes
        // the write).
        Some(ErrorCode::TransactionalIdAuthorizationFailed)
    } else {
        None
    };
    let operation = SupportedOperation::for_produce(version);
    let wait_for_flush = request.acks != 0;
    let mut responses: Vec<TopicProduceResponse> = Vec::new();
    let mut requests = PartitionRequests::new(view.clone(), shard.router.shards());
    for topic_data in request.topic_data {
        let found = if version >= 13 {
            view.topic_by_id(&topic_data.topic_id)
        } else {
            view.topic(&topic_data.name)
        };
        // Clients may not write to the internal topics (Kafka: INVALID_TOPIC_EXCEPTION), nor
        // to a user topic of such a name an earlier version auto-created.
        let internal = if version >= 13 {
            offsets_topic::topic_by_id(&view, &topic_data.topic_id).is_some()
        } else {
            kaas_cluster::internal_topics::is_internal(&topic_data.name)
        } || found
            .is_some_and(|t| kaas_cluster::internal_topics::is_internal(t.name()));
        let topic = found.filter(|_| !internal);
        let unknown = if internal {
            ErrorCode::InvalidTopicException
        } else if version >= 13 {
            ErrorCode::UnknownTopicId
        } else {
            ErrorCode::UnknownTopicOrPartition
        };
        let mut partitions = Vec::with_capacity(topic_data.partition_data.len());
        for data in topic_data.partition_data {
            let mut response = PartitionProduceResponse {
                index: data.index,
                base_offset: -1,
                log_append_time_ms: -1,
                log_start_offset: -1,
                ..Default::default()
            };
            let position = Position {
                topic: responses.len(),
                partition: partitions.len(),
            };
            let error = match (refuse_all, topic, data.records) {
                (Some(error), _, _) => Some(error),
                (None, None, _) => Some(unknown),
                (None, Some(t), _) if !(0..t.partitions()).contains(&data.index) => {
                    Some(ErrorCode::UnknownTopicOrPartition)
                }
                (None, Some(_), None) => Some(ErrorCode::CorruptMessage),
                (None, Some(_), Some(records)) if holds_more_than_one_batch(&records) => {
                    response.error_message =
                        Some("a partition's records must be exactly one record batch".into());
                    Some(ErrorCode::InvalidRecord)
                }
                (None, Some(t), Some(records)) => {
                    let transaction = request.transactional_id.as_ref().and_then(|id| {
                        let (producer_id, producer_epoch) = transactional_producer(&records)?;
                        Some(TransactionalWrite {
                            transactional_id: id.clone(),
                            producer_id,
                            producer_epoch,
                            operation,
                        })
                    });
                    let input = Input {
                        records,
                        wait_for_flush,
                        transaction,
                    };
                    requests.add(position, t, data.index, -1, input).err()
                }
            };
            if let Some(error) = error {
                response.error_code = error.code();
            }
            partitions.push(response);
        }
        responses.push(TopicProduceResponse {
            name: topic_data.name,
            topic_id: topic_data.topic_id,
            partition_responses: partitions,
        });
    }
    for (position, output) in requests.run(shard, append_on_owner).await {
        let response = &mut responses[position.topic].partition_responses[position.partition];
        let output = output.unwrap_or_else(Output::failed);
        response.error_code = output.error.unwrap_or(ErrorCode::None).code();
        response.error_message = output.message;
        response.record_errors = output.record_errors;
        response.base_offset = output.base_offset;
        response.log_append_time_ms = output.log_append_time;
        response.log_start_offset = output.log_start_offset;
    }
    ProduceResponse {
        responses,
        ..Default::default()
    }
}

/// The producer id and epoch of `records` when it is a transactional batch.
fn transactional_producer(records: &[u8]) -> Option<(i64, i16)> {
    BatchHeader::parse(records)
        .ok()
        .filter(BatchHeader::is_transactional)
        .map(|header| (header.producer_id, header.producer_epoch))
}

fn has_transactional_batch(request: &ProduceRequest) -> bool {
    request.topic_data.iter().any(|topic| {
        topic.partition_data.iter().any(|data| {
            data.records
                .as_deref()
                .and_then(transactional_producer)
                .is_some()
        })
    })
}

/// The code a transactional batch is refused with, `None` when it may be appended: checked
/// with its coordinator ([`transaction_verification`]) only when the producer has no
/// transaction open on the partition at its epoch yet (its first batch there in this
/// transaction), as Kafka's leaders check. Called in the partition's turn, so the batches
/// that follow wait for the answer and reach the log in order.
async fn refused_transactional_write(
    shard: &Rc<Shard>,
    log: &kaas_engine::PartitionLog,
    id: &PartitionId,
    write: &TransactionalWrite,
) -> Option<ErrorCode> {
    if log.has_open_transaction(write.producer_id, write.producer_epoch) {
        return None;
    }
    let partition = TopicPartition::new(id.topic.to_string(), id.partition);
    transaction_verification::check(shard, write, BTreeSet::from([partition]))
        .await
        .into_iter()
        .next()
        .map(|(_, code)| code)
}

/// Appends every batch for this shard's partitions, then waits for all their flushes together
/// (one group commit per partition covers them). Each partition is appended in its turn
/// ([`crate::shard::append_turns`]), taken here before the first await. Batches are stamped
/// with the leader epoch the partition was resolved at, which its log checks it is open at.
async fn append_on_owner(shard: Rc<Shard>, items: Vec<Owned<Input>>) -> Vec<(Position, Output)> {
    let tickets: Vec<_> = items
        .iter()
        .map(|item| shard.append_turns.take(&item.partition.id))
        .collect();
    let now = now_ms();
    let mut appended = Vec::with_capacity(items.len());
    let mut outputs = Vec::with_capacity(items.len());
    // Each ticket is dropped at the end of its iteration, once its batch is in the log.
    for (item, ticket) in items.into_iter().zip(tickets) {
        let Owned {
            position,
            partition,
            input,
        } = item;
        let recompressed = match partition.config.compression {
            Some(target) => {
                recompress_batches(&input.records, target, partition.config.max_batch_bytes)
            }
            None => Ok(None),
        };
        let records = match recompressed {
            Ok(Some(rewritten)) => Bytes::from(rewritten),
            Ok(None) => input.records,
            Err(error) => {
                let error = EngineError::InvalidBatch(error);
                outputs.push((
                    position,
                    failure(&partition.id, &PartitionError::Engine(error)),
                ));
                continue;
            }
        };
        ticket.turn().await;
        let log = match partition.log(&shard).await {
            Ok(log) => log,
            Err(error) => {
                outputs.push((position, failure(&partition.id, &error)));
                continue;
            }
        };
        if let Some(write) = &input.transaction {
            if let Some(error) =
                refused_transactional_write(&shard, &log, &partition.id, write).await
            {
                outputs.push((position, Output::failed(error)));
                continue;
            }
        }
        match log.append(&records, partition.leader_epoch, now).await {
            Ok(outcome) => {
                if !outcome.duplicate {
                    shard
                        .metrics
                        .appended(outcome.last_offset + 1 - outcome.base_offset);
                }
                let output = Output {
                    error: None,
                    message: None,
                    record_errors: Vec::new(),
                    base_offset: outcome.base_offset as i64,
                    log_append_time: outcome.log_append_time.unwrap_or(-1),
                    log_start_offset: outcome.log_start_offset as i64,
                };
                if input.wait_for_flush {
                    appended.push((position, partition.id, log, outcome.last_offset + 1, output));
                } else {
                    // acks=0: nobody waits, but readers only see durable data, so flush now.
                    let end = outcome.last_offset + 1;
                    glommio::spawn_local(async move {
                        let _ = log.flush_to(end).await;
                    })
                    .detach();
                    outputs.push((position, output));
                }
            }
            Err(error) => {
                shard.give_up_if_fenced(&partition.id);
                outputs.push((
                    position,
                    failure(&partition.id, &PartitionError::Engine(error)),
                ))
            }
        }
    }
    let flushes = appended
        .into_iter()
        .map(|(position, id, log, end, output)| {
            let shard = &shard;
            async move {
                match log.flush_to(end).await {
                    Ok(()) => (position, output),
                    Err(error) => {
                        // A newer claim on the volume: answered NOT_LEADER_OR_FOLLOWER, and
                        // the partition is given up on this shard.
                        shard.give_up_if_fenced(&id);
                        (position, failure(&id, &PartitionError::Engine(error)))
                    }
                }
            }
        });
    outputs.extend(futures_util::future::join_all(flushes).await);
    outputs
}

/// Whether `records` goes on past its first batch (a `batchLength` too small for a header is
/// left to validation, which answers CORRUPT_MESSAGE for it as Kafka does).
fn holds_more_than_one_batch(records: &[u8]) -> bool {
    let Some(length) = records.get(BATCH_LENGTH_POS..BATCH_LENGTH_POS + 4) else {
        return false;
    };
    let length = i32::from_be_bytes([length[0], length[1], length[2], length[3]]);
    if length < MIN_BATCH_LENGTH {
        return false;
    }
    usize::try_from(length)
        .ok()
        .and_then(|length| length.checked_add(LOG_OVERHEAD))
        .is_some_and(|total| records.len() > total)
}

fn failure(partition: &PartitionId, error: &PartitionError) -> Output {
    let refused = |code: ErrorCode, message: String, record_errors| Output {
        error: Some(code),
        message: Some(message),
        record_errors,
        base_offset: -1,
        log_append_time: -1,
        log_start_offset: -1,
    };
    match error {
        // KIP-467: a per-record rule names the record that broke it.
        PartitionError::Engine(EngineError::InvalidBatch(BatchError::RecordsRefused(faults))) => {
            let (code, message, record_errors) = record_errors::refusal(partition, faults);
            refused(code, message, record_errors)
        }
        PartitionError::Engine(
            engine @ EngineError::InvalidBatch(
                batch @ BatchError::OffsetDeltaMismatch { index, .. },
            ),
        ) => {
            let record_errors = vec![BatchIndexAndErrorMessage {
                batch_index: i32::try_from(*index).unwrap_or(i32::MAX),
                batch_index_error_message: Some(batch.to_string()),
            }];
            refused(error_code(engine), engine.to_string(), record_errors)
        }
        // The flush found a newer leader's claim: the batch may already be in the files that
        // leader reads (they are shared), so it is "possibly written", as a timeout is. With
        // NOT_LEADER_OR_FOLLOWER librdkafka counts it as not persisted, gives the retry a new
        // producer epoch, and the new leader cannot recognise it: the record lands twice.
        // After REQUEST_TIMED_OUT every producer retries the same sequence, which the new
        // leader (its producer state rebuilt from those files) answers as a duplicate. A retry
        // that reaches this broker again gets NOT_LEADER_OR_FOLLOWER: it gave the partition up.
        PartitionError::Engine(engine @ EngineError::Fenced { .. }) => {
            refused(ErrorCode::RequestTimedOut, engine.to_string(), Vec::new())
        }
        _ => refused(partition_error_code(error), error.to_string(), Vec::new()),
    }
}
