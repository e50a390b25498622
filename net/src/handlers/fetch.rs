//! Fetch (key 1): whole record batches from each partition, served from the bytes stored.
//!
//! Limits follow Kafka: each partition returns at most `partition_max_bytes` and the response
//! at most `max_bytes`, except that the first non-empty partition always returns at least one
//! whole batch so a consumer can make progress past a large batch. The response's `max_bytes`
//! is a budget the partitions' reads draw from before they read, in request order on each
//! owner shard: a fetch of 1,000 partitions with 1 MiB each wanted and 50 MB allowed reads
//! about 50 MB from disk, not 1,000 MiB of which most would be dropped. When less than
//! `min_bytes` is available the request waits, up to `max_wait_ms`, for any of its partitions
//! to receive data (long polling), then reads again. Fetch sessions are not kept: every
//! response carries session id 0, which tells clients to send full requests.

use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures_util::future::{join_all, select, select_all, Either, FutureExt};
use kaas_engine::{FetchedRecords, LogConfig, LogOffsets, PartitionId, PartitionLog};

use crate::broker::shard::Shard;
use crate::groups::offsets_topic;
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

/// The bytes a response may still take, shared by its partitions' reads on every shard.
#[derive(Clone)]
struct ResponseBudget {
    left: Arc<AtomicUsize>,
    total: usize,
}

/// What one partition's read may take from a [`ResponseBudget`].
struct Share {
    bytes: usize,
    /// Nothing was taken before: this read may return one batch larger than its share, as
    /// the first partition of a Kafka response does.
    first: bool,
}

impl ResponseBudget {
    fn new(bytes: usize) -> Self {
        ResponseBudget {
            left: Arc::new(AtomicUsize::new(bytes)),
            total: bytes,
        }
    }

    /// Takes up to `wanted` bytes; none when the budget is spent.
    fn reserve(&self, wanted: usize) -> Share {
        let left = self
            .left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                Some(left - left.min(wanted))
            })
            .unwrap_or(0);
        Share {
            bytes: left.min(wanted),
            first: left == self.total,
        }
    }

    /// Gives back what a read reserved but did not use.
    fn give_back(&self, bytes: usize) {
        self.left.fetch_add(bytes, Ordering::Relaxed);
    }
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
                .cloned()
                .or_else(|| offsets_topic::topic_by_id(&view, &fetch_topic.topic_id))
        } else {
            offsets_topic::topic_by_name(&view, &fetch_topic.topic)
                .or_else(|| view.topic(&fetch_topic.topic).cloned())
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
            let error = match topic.as_ref() {
                None if version >= 13 => ErrorCode::UnknownTopicId,
                None => ErrorCode::UnknownTopicOrPartition,
                Some(t) if !(0..t.partitions).contains(&fetch_partition.partition) => {
                    ErrorCode::UnknownTopicOrPartition
                }
                Some(t) => match check_leader_epoch(
                    fetch_partition.current_leader_epoch,
                    view.leader_epoch(&t.name, fetch_partition.partition),
                ) {
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
    let max_bytes = request.max_bytes.max(0) as usize;
    let mut outputs = read_all(shard, &items, max_bytes).await;
    loop {
        let available: usize = outputs.iter().map(|(_, o)| chunks_len(&o.chunks)).sum();
        let any_error = outputs.iter().any(|(_, o)| o.error != ErrorCode::None);
        let now = Instant::now();
        if available >= min_bytes.max(1) || any_error || now >= deadline || items.is_empty() {
            break;
        }
        wait_for_any(shard, &items, deadline).await;
        outputs = read_all(shard, &items, max_bytes).await;
    }

    let mut response_bytes = 0usize;
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

/// Reads every partition, all of them drawing on one budget of `max_bytes`.
async fn read_all(
    shard: &Rc<Shard>,
    items: &[(usize, PartitionId, Input)],
    max_bytes: usize,
) -> Vec<(usize, Output)> {
    // At least one byte, so that a request with `max_bytes` 0 still gets its first batch.
    let budget = ResponseBudget::new(max_bytes.max(1));
    let work_items = items
        .iter()
        .map(|(slot, id, input)| Item {
            slot: *slot,
            id: id.clone(),
            input: (input.clone(), budget.clone()),
        })
        .collect();
    run_on_owners(shard, work_items, read_on_owner).await
}

/// Reads the owner's partitions concurrently, so that disk reads for several partitions are
/// in flight at once.
async fn read_on_owner(
    shard: Rc<Shard>,
    items: Vec<Item<(Input, ResponseBudget)>>,
) -> Vec<(usize, Output)> {
    join_all(items.into_iter().map(|item| {
        let shard = shard.clone();
        async move { (item.slot, read_one(&shard, item.id, item.input).await) }
    }))
    .await
}

async fn read_one(
    shard: &Rc<Shard>,
    id: PartitionId,
    (input, budget): (Input, ResponseBudget),
) -> Output {
    if offsets_topic::is_offsets_topic(&id.topic) {
        return read_offsets_topic(shard, id.partition, &input, &budget);
    }
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
        read_within_budget(
            shard,
            &log,
            input.offset as u64,
            input.max_bytes,
            &offsets,
            &budget,
        )
        .await
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

/// A `__consumer_offsets` read (served from the group coordinator, see `groups::offsets_topic`),
/// drawing on the response budget like a log read.
fn read_offsets_topic(
    shard: &Shard,
    partition: i32,
    input: &Input,
    budget: &ResponseBudget,
) -> Output {
    let topic = shard.groups.offsets_topic();
    let wanted = match topic.high_watermark(partition) {
        Ok(end) if input.offset < end => input.max_bytes,
        _ => 0,
    };
    let share = budget.reserve(wanted);
    let read = if share.bytes == 0 && wanted > 0 {
        topic.read(partition, input.offset, 0).map(|mut read| {
            read.batches.clear();
            read
        })
    } else {
        topic.read(partition, input.offset, share.bytes)
    };
    match read {
        Ok(read) => {
            let used = chunks_len(&read.batches);
            budget.give_back(share.bytes.saturating_sub(used));
            Output {
                error: ErrorCode::None,
                high_watermark: read.high_watermark,
                log_start_offset: read.log_start_offset,
                chunks: read.batches,
            }
        }
        Err(error) => {
            budget.give_back(share.bytes);
            Output {
                error,
                high_watermark: topic.high_watermark(partition).unwrap_or(-1),
                log_start_offset: 0,
                chunks: Vec::new(),
            }
        }
    }
}

/// Reads up to `partition_max` bytes from `offset`, first taking them from the response's
/// `budget`, and gives back what the read did not use. A partition the spent budget leaves no
/// room for is not read (empty records, no error).
async fn read_within_budget(
    shard: &Shard,
    log: &PartitionLog,
    offset: u64,
    partition_max: usize,
    offsets: &LogOffsets,
    budget: &ResponseBudget,
) -> kaas_engine::Result<FetchedRecords> {
    // Nothing to read at or past the high watermark: no budget taken (the read still checks
    // the offset).
    let wanted = if offset >= offsets.high_watermark {
        0
    } else {
        partition_max
    };
    let share = budget.reserve(wanted);
    if share.bytes == 0 && wanted > 0 {
        return Ok(FetchedRecords {
            chunks: Vec::new(),
            high_watermark: offsets.high_watermark,
            log_start_offset: offsets.log_start_offset,
        });
    }
    let mut read = log.read(offset, share.bytes.max(1)).await;
    let used = read
        .as_ref()
        .map_or(0, |fetched| chunks_len(&fetched.chunks));
    shard.metrics.fetch_read(used);
    if used <= share.bytes {
        budget.give_back(share.bytes - used);
        return read;
    }
    // A read returns at least one batch, even one larger than its share.
    let extra = used - share.bytes;
    let taken = budget.reserve(extra).bytes;
    if taken < extra && share.bytes < wanted && !share.first {
        // The budget cut this share short and the batch does not fit: the partition is left
        // for the next fetch.
        if let Ok(fetched) = read.as_mut() {
            fetched.chunks.clear();
        }
        budget.give_back(share.bytes + taken);
    }
    read
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
        } else if offsets_topic::is_offsets_topic(&item.id.topic) {
            let shard = shard.clone();
            let (partition, offset) = (item.id.partition, item.input.offset);
            waits.push(
                async move {
                    let topic = shard.groups.offsets_topic();
                    let end = topic.high_watermark(partition).unwrap_or(0);
                    topic.wait_for_data_beyond(partition, offset.max(end)).await
                }
                .boxed_local(),
            );
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
