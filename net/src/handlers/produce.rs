//! Produce (key 0): append record batches; with acks 1 or all, answer only once they are
//! fdatasync'd (without replication both mean "on the disk").

use std::rc::Rc;

use bytes::Bytes;
use kaas_engine::{LogConfig, PartitionId};

use crate::broker::shard::Shard;
use crate::handlers::partition_work::{run_on_owners, Item};
use crate::handlers::{error_code, now_ms};
use crate::protocol::messages::produce::{
    PartitionProduceResponse, ProduceRequest, ProduceResponse, TopicProduceResponse,
};
use crate::protocol::ErrorCode;

struct Input {
    records: Bytes,
    config: LogConfig,
    wait_for_flush: bool,
}

#[derive(Default)]
struct Output {
    error: Option<ErrorCode>,
    message: Option<String>,
    base_offset: i64,
    log_append_time: i64,
    log_start_offset: i64,
}

/// Answers Produce at `version` (the caller sends nothing back for acks=0).
pub async fn handle(shard: &Rc<Shard>, request: ProduceRequest, version: i16) -> ProduceResponse {
    let view = shard.view.load();
    let refuse_all = if !matches!(request.acks, -1..=1) {
        Some(ErrorCode::InvalidRequiredAcks)
    } else if request.transactional_id.is_some() {
        Some(ErrorCode::InvalidTxnState)
    } else {
        None
    };
    let mut responses: Vec<TopicProduceResponse> = Vec::new();
    let mut slots: Vec<(usize, usize)> = Vec::new();
    let mut items = Vec::new();
    for topic_data in request.topic_data {
        let topic = if version >= 13 {
            view.topic_by_id(&topic_data.topic_id)
        } else {
            view.topic(&topic_data.name)
        };
        let unknown = if version >= 13 {
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
            let error = match (refuse_all, topic, data.records) {
                (Some(error), _, _) => Some(error),
                (None, None, _) => Some(unknown),
                (None, Some(t), _) if !(0..t.partitions).contains(&data.index) => {
                    Some(ErrorCode::UnknownTopicOrPartition)
                }
                (None, Some(_), None) => Some(ErrorCode::CorruptMessage),
                (None, Some(t), Some(records)) => {
                    slots.push((responses.len(), partitions.len()));
                    items.push(Item {
                        slot: slots.len() - 1,
                        id: PartitionId::new(t.name.clone(), data.index),
                        input: Input {
                            records,
                            config: t.log_config.clone(),
                            wait_for_flush: request.acks != 0,
                        },
                    });
                    None
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
    for (slot, output) in run_on_owners(shard, items, append_on_owner).await {
        let (topic_index, partition_index) = slots[slot];
        let response = &mut responses[topic_index].partition_responses[partition_index];
        response.error_code = output.error.unwrap_or(ErrorCode::None).code();
        response.error_message = output.message;
        response.base_offset = output.base_offset;
        response.log_append_time_ms = output.log_append_time;
        response.log_start_offset = output.log_start_offset;
    }
    ProduceResponse {
        responses,
        ..Default::default()
    }
}

/// Appends every batch for this shard's partitions, then waits for all their flushes together
/// (one group commit per partition covers them).
async fn append_on_owner(shard: Rc<Shard>, items: Vec<Item<Input>>) -> Vec<(usize, Output)> {
    let now = now_ms();
    let mut appended = Vec::with_capacity(items.len());
    let mut outputs = Vec::with_capacity(items.len());
    for item in items {
        let log = match shard.log(&item.id, item.input.config).await {
            Ok(log) => log,
            Err(error) => {
                outputs.push((item.slot, failure(&error)));
                continue;
            }
        };
        match log
            .append(&item.input.records, shard.open_epoch(&item.id), now)
            .await
        {
            Ok(outcome) => {
                if !outcome.duplicate {
                    shard
                        .metrics
                        .appended(outcome.last_offset + 1 - outcome.base_offset);
                }
                let output = Output {
                    error: None,
                    message: None,
                    base_offset: outcome.base_offset as i64,
                    log_append_time: outcome.log_append_time.unwrap_or(-1),
                    log_start_offset: outcome.log_start_offset as i64,
                };
                if item.input.wait_for_flush {
                    appended.push((item.slot, log, outcome.last_offset + 1, output));
                } else {
                    // acks=0: nobody waits, but readers only see durable data, so flush now.
                    let end = outcome.last_offset + 1;
                    glommio::spawn_local(async move {
                        let _ = log.flush_to(end).await;
                    })
                    .detach();
                    outputs.push((item.slot, output));
                }
            }
            Err(error) => outputs.push((item.slot, failure(&error))),
        }
    }
    let flushes = appended
        .into_iter()
        .map(|(slot, log, end, output)| async move {
            match log.flush_to(end).await {
                Ok(()) => (slot, output),
                Err(error) => (slot, failure(&error)),
            }
        });
    outputs.extend(futures_util::future::join_all(flushes).await);
    outputs
}

fn failure(error: &kaas_engine::EngineError) -> Output {
    Output {
        error: Some(error_code(error)),
        message: Some(error.to_string()),
        base_offset: -1,
        log_append_time: -1,
        log_start_offset: -1,
    }
}
