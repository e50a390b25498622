//! Fetch (key 1): whole record batches from each partition, served from the bytes stored.
//!
//! Limits follow Kafka: each partition returns at most `partition_max_bytes` and the response
//! at most `max_bytes`, except that the first non-empty partition always returns at least one
//! whole batch so a consumer can make progress past a large batch. The response's `max_bytes`
//! is a budget the partitions' reads draw from before they read, in request order on each
//! owner shard: a fetch of 1,000 partitions with 1 MiB each wanted and 50 MB allowed reads
//! about 50 MB from disk, not 1,000 MiB of which most would be dropped. When less than
//! `min_bytes` is available the request waits, up to `max_wait_ms`, for its partitions to
//! receive data (long polling): each owner shard waits and reads again inside its one hop,
//! and the first shard whose read completes `min_bytes` ends every shard's wait
//! ([`long_poll`]). Fetch sessions are not kept: every
//! response carries session id 0, which tells clients to send full requests.
//!
//! Transactions ([`isolation`], [`log_read`]): a READ_COMMITTED fetch (`isolation_level` 1)
//! reads only below the partition's last stable offset, lists the aborted transactions among
//! the batches it returns, and long-polls for the last stable offset to move (a commit or
//! abort marker made durable), not for appends. Both levels report the last stable offset;
//! READ_UNCOMMITTED sends a null aborted-transactions list, as Kafka does.

pub(crate) mod isolation;
mod log_read;
mod long_poll;
mod response_budget;
#[cfg(test)]
mod tests;

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures_util::future::{join_all, select, select_all, Either, FutureExt};
use kaas_engine::{AbortedTransaction, LogOffsets, PartitionLog};

use crate::groups::offsets_topic;
use crate::handlers::partition_request::{Owned, PartitionRequests, Position};
use crate::handlers::{error_code, partition_error_code};
use crate::protocol::messages::fetch::{
    self as wire, FetchRequest, FetchResponse, FetchableTopicResponse, PartitionData,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;
use isolation::Isolation;
use log_read::LogRead;
use long_poll::LongPoll;
use response_budget::ResponseBudget;

struct Input {
    offset: i64,
    max_bytes: usize,
}

struct Output {
    error: ErrorCode,
    high_watermark: i64,
    last_stable_offset: i64,
    log_start_offset: i64,
    chunks: Vec<Bytes>,
    /// READ_COMMITTED: the aborted transactions among `chunks`; `None` (Kafka's null) for
    /// READ_UNCOMMITTED and for a partition that failed.
    aborted: Option<Vec<AbortedTransaction>>,
}

/// One partition's read and what it holds of the response budget.
struct Read {
    output: Output,
    charged: usize,
}

/// Answers Fetch at `version`.
pub async fn handle(shard: &Rc<Shard>, request: FetchRequest, version: i16) -> FetchResponse {
    if request.session_id != 0 {
        return FetchResponse {
            error_code: ErrorCode::FetchSessionIdNotFound.code(),
            ..Default::default()
        };
    }
    // Kafka reads the level only when there is a partition to read.
    let isolation = match Isolation::from_wire(request.isolation_level) {
        Some(isolation) => isolation,
        None if request.topics.iter().all(|t| t.partitions.is_empty()) => {
            Isolation::ReadUncommitted
        }
        None => return unknown_isolation_level(request, version),
    };
    let view = shard.view.load();
    let mut responses: Vec<FetchableTopicResponse> = Vec::new();
    let mut requests = PartitionRequests::new(view.clone(), shard.router.shards());
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
            // Empty, not null, records for a partition that is refused here, as Kafka
            // answers: librdkafka treats a null record set as a parse failure.
            let mut data = PartitionData {
                partition_index: fetch_partition.partition,
                high_watermark: -1,
                last_stable_offset: -1,
                log_start_offset: -1,
                aborted_transactions: None,
                records: Some(Bytes::new()),
                ..Default::default()
            };
            let position = Position {
                topic: responses.len(),
                partition: partitions.len(),
            };
            let error = match topic.as_ref() {
                None if version >= 13 => ErrorCode::UnknownTopicId,
                None => ErrorCode::UnknownTopicOrPartition,
                Some(t) => {
                    let input = Input {
                        offset: fetch_partition.fetch_offset,
                        max_bytes: fetch_partition.partition_max_bytes.max(0) as usize,
                    };
                    match requests.add(
                        position,
                        t,
                        fetch_partition.partition,
                        fetch_partition.current_leader_epoch,
                        input,
                    ) {
                        Ok(()) => ErrorCode::None,
                        Err(error) => error,
                    }
                }
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

    let max_bytes = request.max_bytes.max(0) as usize;
    let poll = Arc::new(LongPoll::new(
        shard.router.shards(),
        max_bytes,
        request.min_bytes.max(0) as usize,
        Instant::now() + Duration::from_millis(request.max_wait_ms.max(0) as u64),
    ));
    let outputs = requests
        .run(shard, move |owner, items| {
            fetch_on_owner(owner, items, poll.clone(), isolation)
        })
        .await;

    let mut response_bytes = 0usize;
    for (position, output) in outputs {
        let data = &mut responses[position.topic].partitions[position.partition];
        let output = output.unwrap_or_else(failure);
        data.error_code = output.error.code();
        data.high_watermark = output.high_watermark;
        data.last_stable_offset = output.last_stable_offset;
        data.log_start_offset = output.log_start_offset;
        let len = chunks_len(&output.chunks);
        if len > 0 && (response_bytes == 0 || response_bytes + len <= max_bytes) {
            response_bytes += len;
            data.records = Some(join_chunks(output.chunks));
            data.aborted_transactions = output.aborted.map(to_wire);
        } else {
            data.records = Some(Bytes::new());
            data.aborted_transactions = output.aborted.map(|_| Vec::new());
        }
    }
    FetchResponse {
        responses,
        ..Default::default()
    }
}

/// A fetch's owner-shard work, all in the one hop: read the shard's partitions; while the
/// fetch as a whole has less than `min_bytes` (and no error, and time is left), wait on this
/// shard for one of them to receive data, or for another shard's reads to complete the fetch,
/// and read again. Returns the last read of every partition. The partitions are read
/// concurrently, so that disk reads for several of them are in flight at once.
async fn fetch_on_owner(
    shard: Rc<Shard>,
    items: Vec<Owned<Input>>,
    poll: Arc<LongPoll>,
    isolation: Isolation,
) -> Vec<(Position, Output)> {
    // What this shard's current reads count towards the fetch, and hold of its budget.
    let mut counted = 0usize;
    let mut charged = 0usize;
    loop {
        // A read again replaces the previous one: its share of the budget goes back first.
        poll.budget.give_back(charged);
        let reads = join_all(
            items
                .iter()
                .map(|item| read_one(&shard, item, &poll.budget, isolation)),
        )
        .await;
        charged = reads.iter().map(|read| read.charged).sum();
        let bytes: usize = reads
            .iter()
            .map(|read| chunks_len(&read.output.chunks))
            .sum();
        poll.count(counted, bytes);
        counted = bytes;
        if reads
            .iter()
            .any(|read| read.output.error != ErrorCode::None)
            || poll.has_enough()
        {
            poll.finish();
        }
        let past_deadline = Instant::now() >= poll.deadline;
        if poll.is_finished()
            || past_deadline
            || !wait_for_any(&shard, &items, &reads, &poll, isolation).await
        {
            poll.leave(shard.index);
            return items
                .iter()
                .zip(reads)
                .map(|(item, read)| (item.position, read.output))
                .collect();
        }
    }
}

/// Reads one partition (its log, or a `__consumer_offsets` partition) at `isolation`,
/// drawing on `budget`.
async fn read_one(
    shard: &Rc<Shard>,
    item: &Owned<Input>,
    budget: &ResponseBudget,
    isolation: Isolation,
) -> Read {
    if item.partition.is_offsets_topic() {
        let mut read = read_offsets_topic(shard, item.partition.id.partition, &item.input, budget);
        // No transactions are read from there: stable up to its end.
        read.output.last_stable_offset = read.output.high_watermark;
        if read.output.error == ErrorCode::None && isolation.is_committed() {
            read.output.aborted = Some(Vec::new());
        }
        return read;
    }
    let log = match item.partition.log(shard).await {
        Err(error) => {
            return Read {
                output: failure(partition_error_code(&error)),
                charged: 0,
            }
        }
        Ok(log) => log,
    };
    let offsets = log.offsets();
    let (read, charged) = if item.input.offset < 0 {
        let error = kaas_engine::EngineError::OffsetOutOfRange {
            offset: 0,
            start: offsets.log_start_offset,
            end: offsets.log_end_offset,
        };
        (Err(error), 0)
    } else {
        read_within_budget(
            shard,
            &log,
            item.input.offset as u64,
            item.input.max_bytes,
            &offsets,
            budget,
            isolation,
        )
        .await
    };
    let output = match read {
        Ok(read) => Output {
            error: ErrorCode::None,
            high_watermark: read.records.high_watermark as i64,
            last_stable_offset: read.last_stable_offset as i64,
            log_start_offset: read.records.log_start_offset as i64,
            chunks: read.records.chunks,
            aborted: read.aborted,
        },
        Err(error) => Output {
            error: error_code(&error),
            high_watermark: offsets.high_watermark as i64,
            last_stable_offset: log.last_stable_offset().min(offsets.high_watermark) as i64,
            log_start_offset: offsets.log_start_offset as i64,
            chunks: Vec::new(),
            aborted: None,
        },
    };
    Read { output, charged }
}

/// A `__consumer_offsets` read (served from the group coordinator, see `groups::offsets_topic`),
/// drawing on the response budget like a log read.
fn read_offsets_topic(
    shard: &Shard,
    partition: i32,
    input: &Input,
    budget: &ResponseBudget,
) -> Read {
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
            let unused = share.bytes.saturating_sub(used);
            budget.give_back(unused);
            Read {
                output: Output {
                    error: ErrorCode::None,
                    high_watermark: read.high_watermark,
                    last_stable_offset: read.high_watermark,
                    log_start_offset: read.log_start_offset,
                    chunks: read.batches,
                    aborted: None,
                },
                charged: share.bytes - unused,
            }
        }
        Err(error) => {
            budget.give_back(share.bytes);
            Read {
                output: Output {
                    error,
                    high_watermark: topic.high_watermark(partition).unwrap_or(-1),
                    last_stable_offset: topic.high_watermark(partition).unwrap_or(-1),
                    log_start_offset: 0,
                    chunks: Vec::new(),
                    aborted: None,
                },
                charged: 0,
            }
        }
    }
}

/// Reads up to `partition_max` bytes from `offset` at `isolation`, first taking them from
/// the response's `budget`, and gives back what the read did not use; returns the read and
/// what it still holds of the budget. A partition the spent budget leaves no room for is not
/// read (empty records, no error).
async fn read_within_budget(
    shard: &Shard,
    log: &PartitionLog,
    offset: u64,
    partition_max: usize,
    offsets: &LogOffsets,
    budget: &ResponseBudget,
    isolation: Isolation,
) -> (kaas_engine::Result<LogRead>, usize) {
    // Nothing to read at or past the high watermark (READ_COMMITTED: the last stable
    // offset): no budget taken (the read still checks the offset).
    let wanted = if offset >= log_read::read_bound(log, offsets.high_watermark, isolation) {
        0
    } else {
        partition_max
    };
    let share = budget.reserve(wanted);
    if share.bytes == 0 && wanted > 0 {
        return (Ok(LogRead::nothing(log, isolation)), 0);
    }
    let mut read = log_read::read_log(log, offset, share.bytes.max(1), isolation).await;
    let used = read
        .as_ref()
        .map_or(0, |read| chunks_len(&read.records.chunks));
    shard.metrics.fetch_read(used);
    if used <= share.bytes {
        budget.give_back(share.bytes - used);
        return (read, used);
    }
    // A read returns at least one batch, even one larger than its share.
    let extra = used - share.bytes;
    let taken = budget.reserve(extra).bytes;
    if taken < extra && share.bytes < wanted && !share.first {
        // The budget cut this share short and the batch does not fit: the partition is left
        // for the next fetch.
        if let Ok(read) = read.as_mut() {
            read.clear();
        }
        budget.give_back(share.bytes + taken);
        return (read, 0);
    }
    (read, share.bytes + taken)
}

/// Waits on this shard until one of its partitions has data beyond what `reads` saw, another
/// shard finishes the fetch, or the deadline passes. Whether to read again: true only when
/// this shard's data may have grown.
async fn wait_for_any(
    shard: &Rc<Shard>,
    items: &[Owned<Input>],
    reads: &[Read],
    poll: &LongPoll,
    isolation: Isolation,
) -> bool {
    let mut waits = Vec::with_capacity(items.len());
    for (item, read) in items.iter().zip(reads) {
        // Wait for data beyond what this read saw, or a fetch that wants more than is
        // available would spin; data that arrived since the read ends the wait at once.
        // READ_COMMITTED sees only what is below the last stable offset: an append to an
        // open transaction gives it nothing to read, a durable marker may.
        let visible_end = match isolation {
            Isolation::ReadUncommitted => read.output.high_watermark,
            Isolation::ReadCommitted => read.output.last_stable_offset,
        };
        let seen = visible_end.max(item.input.offset).max(0);
        let id = &item.partition.id;
        if item.partition.is_offsets_topic() {
            let shard = shard.clone();
            let partition = id.partition;
            waits.push(
                async move {
                    let topic = shard.groups.offsets_topic();
                    topic.wait_for_data_beyond(partition, seen).await
                }
                .boxed_local(),
            );
        } else if let Some(log) = shard.logs.get(id) {
            waits.push(
                async move {
                    match isolation {
                        Isolation::ReadUncommitted => log.wait_for_data_beyond(seen as u64).await,
                        Isolation::ReadCommitted => {
                            log.wait_for_stable_data_beyond(seen as u64).await
                        }
                    }
                }
                .boxed_local(),
            );
        }
    }
    let data = async move {
        if waits.is_empty() {
            std::future::pending::<()>().await;
        }
        select_all(waits).await;
    }
    .boxed_local();
    let timeout = glommio::timer::sleep(poll.deadline.saturating_duration_since(Instant::now()));
    let ended = select(
        poll.finished(shard.index).boxed_local(),
        timeout.boxed_local(),
    );
    match select(data, ended).await {
        Either::Left(_) => !poll.is_finished(),
        Either::Right(_) => false,
    }
}

fn failure(error: ErrorCode) -> Output {
    Output {
        error,
        high_watermark: -1,
        last_stable_offset: -1,
        log_start_offset: -1,
        chunks: Vec::new(),
        aborted: None,
    }
}

/// Kafka's answer to an `isolation_level` it does not know (`FetchRequest.getErrorResponse`
/// of the IllegalArgumentException `IsolationLevel.forId` throws): UNKNOWN_SERVER_ERROR at
/// the top, and before v13 on every partition asked for as well.
fn unknown_isolation_level(request: FetchRequest, version: i16) -> FetchResponse {
    let error = ErrorCode::UnknownServerError;
    let responses = if version >= 13 {
        Vec::new()
    } else {
        request
            .topics
            .into_iter()
            .map(|topic| FetchableTopicResponse {
                topic: topic.topic,
                topic_id: topic.topic_id,
                partitions: topic
                    .partitions
                    .into_iter()
                    .map(|partition| PartitionData {
                        partition_index: partition.partition,
                        error_code: error.code(),
                        high_watermark: -1,
                        last_stable_offset: -1,
                        log_start_offset: -1,
                        aborted_transactions: None,
                        records: Some(Bytes::new()),
                        ..Default::default()
                    })
                    .collect(),
            })
            .collect()
    };
    FetchResponse {
        error_code: error.code(),
        session_id: request.session_id,
        responses,
        ..Default::default()
    }
}

/// The engine's aborted transactions as the response lists them.
fn to_wire(aborted: Vec<AbortedTransaction>) -> Vec<wire::AbortedTransaction> {
    aborted
        .into_iter()
        .map(|aborted| wire::AbortedTransaction {
            producer_id: aborted.producer_id,
            first_offset: aborted.first_offset as i64,
        })
        .collect()
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
