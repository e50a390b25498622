//! Fetch (key 1): whole record batches from each partition, served from the bytes stored.
//!
//! Limits follow Kafka: each partition returns at most `partition_max_bytes` and the response
//! at most `max_bytes`, except that the first non-empty partition always returns at least one
//! whole batch so a consumer can make progress past a large batch. When less than
//! `min_bytes` is available the request waits, up to `max_wait_ms`, for any of its partitions
//! to receive data (long polling), then reads again. Fetch sessions are not kept: every
//! response carries session id 0, which tells clients to send full requests.

use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures_util::future::{join_all, select, select_all, Either, FutureExt};
use kaas_engine::{LogConfig, PartitionId};

use crate::broker::shard::Shard;
use crate::handlers::partition_work::{run_on_owners, Item};
use crate::handlers::{check_leader_epoch, error_code};
use crate::protocol::messages::fetch::{
    FetchRequest, FetchResponse, FetchableTopicResponse, PartitionData,
};
use crate::protocol::ErrorCode;

#[derive(Clone)]
struct Input {
    offset: i64,
    max_bytes: usize,
    config: LogConfig,
}

struct Output {
    error: ErrorCode,
    high_watermark: i64,
    log_start_offset: i64,
    chunks: Vec<Bytes>,
}

/// Answers Fetch at `version`.
pub async fn handle(shard: &Rc<Shard>, request: FetchRequest, version: i16) -> FetchResponse {
    if request.session_id != 0 {
        return FetchResponse {
            error_code: ErrorCode::FetchSessionIdNotFound.code(),
            ..Default::default()
        };
    }
    let view = shard.view.load();
    let mut responses: Vec<FetchableTopicResponse> = Vec::new();
    let mut slots: Vec<(usize, usize)> = Vec::new();
    let mut items: Vec<(usize, PartitionId, Input)> = Vec::new();
    for fetch_topic in request.topics {
        let topic = if version >= 13 {
            view.topic_by_id(&fetch_topic.topic_id)
        } else {
            view.topic(&fetch_topic.topic)
        };
        let mut partitions = Vec::with_capacity(fetch_topic.partitions.len());
        for fetch_partition in fetch_topic.partitions {
            let mut data = PartitionData {
                partition_index: fetch_partition.partition,
                high_watermark: -1,
                last_stable_offset: -1,
                log_start_offset: -1,
                ..Default::default()
            };
            let error = match topic {
                None if version >= 13 => ErrorCode::UnknownTopicId,
                None => ErrorCode::UnknownTopicOrPartition,
                Some(t) if !(0..t.partitions).contains(&fetch_partition.partition) => {
                    ErrorCode::UnknownTopicOrPartition
                }
                Some(t) => match check_leader_epoch(fetch_partition.current_leader_epoch) {
                    ErrorCode::None => {
                        slots.push((responses.len(), partitions.len()));
                        items.push((
                            slots.len() - 1,
                            PartitionId::new(t.name.clone(), fetch_partition.partition),
                            Input {
                                offset: fetch_partition.fetch_offset,
                                max_bytes: fetch_partition.partition_max_bytes.max(0) as usize,
                                config: t.log_config.clone(),
                            },
                        ));
                        ErrorCode::None
                    }
                    error => error,
                },
            };
            data.error_code = error.code();
            partitions.push(data);
        }
        responses.push(FetchableTopicResponse {
            topic: fetch_topic.topic,
            topic_id: fetch_topic.topic_id,
            partitions,
        });
    }

    let deadline = Instant::now() + Duration::from_millis(request.max_wait_ms.max(0) as u64);
    let min_bytes = request.min_bytes.max(0) as usize;
    let mut outputs = read_all(shard, &items).await;
    loop {
        let available: usize = outputs.iter().map(|(_, o)| chunks_len(&o.chunks)).sum();
        let any_error = outputs.iter().any(|(_, o)| o.error != ErrorCode::None);
        let now = Instant::now();
        if available >= min_bytes.max(1) || any_error || now >= deadline || items.is_empty() {
            break;
        }
        wait_for_any(shard, &items, deadline).await;
        outputs = read_all(shard, &items).await;
    }

    let mut response_bytes = 0usize;
    let max_bytes = request.max_bytes.max(0) as usize;
    outputs.sort_by_key(|(slot, _)| *slot);
    for (slot, output) in outputs {
        let (topic_index, partition_index) = slots[slot];
        let data = &mut responses[topic_index].partitions[partition_index];
        data.error_code = output.error.code();
        data.high_watermark = output.high_watermark;
        data.last_stable_offset = output.high_watermark;
        data.log_start_offset = output.log_start_offset;
        let len = chunks_len(&output.chunks);
        if len > 0 && (response_bytes == 0 || response_bytes + len <= max_bytes) {
            response_bytes += len;
            data.records = Some(join_chunks(output.chunks));
        } else {
            data.records = Some(Bytes::new());
        }
    }
    FetchResponse {
        responses,
        ..Default::default()
    }
}

async fn read_all(
    shard: &Rc<Shard>,
    items: &[(usize, PartitionId, Input)],
) -> Vec<(usize, Output)> {
    let work_items = items
        .iter()
        .map(|(slot, id, input)| Item {
            slot: *slot,
            id: id.clone(),
            input: input.clone(),
        })
        .collect();
    run_on_owners(shard, work_items, read_on_owner).await
}

/// Reads the owner's partitions concurrently, so that disk reads for several partitions are
/// in flight at once.
async fn read_on_owner(shard: Rc<Shard>, items: Vec<Item<Input>>) -> Vec<(usize, Output)> {
    join_all(items.into_iter().map(|item| {
        let shard = shard.clone();
        async move { (item.slot, read_one(&shard, item.id, item.input).await) }
    }))
    .await
}

async fn read_one(shard: &Shard, id: PartitionId, input: Input) -> Output {
    let log = match shard.log(&id, input.config).await {
        Err(error) => return failure(error_code(&error)),
        Ok(log) => log,
    };
    let offsets = log.offsets();
    let read = if input.offset < 0 {
        Err(kaas_engine::EngineError::OffsetOutOfRange {
            offset: 0,
            start: offsets.log_start_offset,
            end: offsets.log_end_offset,
        })
    } else {
        log.read(input.offset as u64, input.max_bytes).await
    };
    match read {
        Ok(fetched) => Output {
            error: ErrorCode::None,
            high_watermark: fetched.high_watermark as i64,
            log_start_offset: fetched.log_start_offset as i64,
            chunks: fetched.chunks,
        },
        Err(error) => Output {
            error: error_code(&error),
            high_watermark: offsets.high_watermark as i64,
            log_start_offset: offsets.log_start_offset as i64,
            chunks: Vec::new(),
        },
    }
}

/// Waits until any partition has data past its fetch offset, or the deadline.
async fn wait_for_any(shard: &Rc<Shard>, items: &[(usize, PartitionId, Input)], deadline: Instant) {
    let work_items: Vec<Item<Input>> = items
        .iter()
        .map(|(slot, id, input)| Item {
            slot: *slot,
            id: id.clone(),
            input: input.clone(),
        })
        .collect();
    // Each owner shard returns when one of its partitions has data or the deadline passes;
    // the first shard to answer ends the wait.
    let view = shard.view.load();
    let mut groups: Vec<Vec<Item<Input>>> =
        (0..shard.router.shards()).map(|_| Vec::new()).collect();
    for item in work_items {
        let owner = view.owner_shard(&item.id.topic, item.id.partition);
        groups[owner].push(item);
    }
    let waits: Vec<_> = groups
        .into_iter()
        .enumerate()
        .filter(|(_, group)| !group.is_empty())
        .map(|(target, group)| {
            shard
                .router
                .call(shard, target, move |owner| {
                    wait_on_owner(owner, group, deadline)
                })
                .boxed_local()
        })
        .collect();
    if !waits.is_empty() {
        select_all(waits).await;
    }
}

async fn wait_on_owner(shard: Rc<Shard>, items: Vec<Item<Input>>, deadline: Instant) {
    let mut waits = Vec::with_capacity(items.len());
    for item in items {
        if let Some(log) = shard.logs.get(&item.id) {
            // Wait for data beyond what is already there, or a fetch that wants more than is
            // available would spin.
            let offset = (item.input.offset.max(0) as u64).max(log.offsets().high_watermark);
            waits.push(async move { log.wait_for_data_beyond(offset).await }.boxed_local());
        }
    }
    let timeout =
        glommio::timer::sleep(deadline.saturating_duration_since(Instant::now())).boxed_local();
    if waits.is_empty() {
        timeout.await;
        return;
    }
    match select(select_all(waits), timeout).await {
        Either::Left(_) | Either::Right(_) => {}
    }
}

fn failure(error: ErrorCode) -> Output {
    Output {
        error,
        high_watermark: -1,
        log_start_offset: -1,
        chunks: Vec::new(),
    }
}

fn chunks_len(chunks: &[Bytes]) -> usize {
    chunks.iter().map(Bytes::len).sum()
}

/// One buffer for the records field (a single chunk is passed through without copying).
fn join_chunks(mut chunks: Vec<Bytes>) -> Bytes {
    if chunks.len() == 1 {
        return chunks.pop().unwrap_or_default();
    }
    let mut joined = BytesMut::with_capacity(chunks_len(&chunks));
    for chunk in chunks {
        joined.extend_from_slice(&chunk);
    }
    joined.freeze()
}
