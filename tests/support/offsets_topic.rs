//! Reading `__consumer_offsets` as a client does: Fetch of one partition and the records of
//! the uncompressed v2 batches it returns.

use bytes::{Buf, Bytes};
use kaas_net::protocol::messages::fetch::{FetchPartition, FetchRequest, FetchTopic};
use kaas_net::protocol::Response;

use super::WireClient;

/// The topic's name.
pub const NAME: &str = "__consumer_offsets";

/// One record of a fetched batch: (offset, key, value).
pub type Record = (i64, Bytes, Option<Bytes>);

fn varint(buf: &mut Bytes) -> i64 {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = buf.get_u8();
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
    }
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}

/// Every record of the uncompressed v2 batches in `records`.
pub fn records(mut records: Bytes) -> Vec<Record> {
    let mut out = Vec::new();
    while records.has_remaining() {
        let base_offset = records.get_i64();
        let length = records.get_i32() as usize;
        let mut batch = records.split_to(length);
        batch.advance(4 + 1 + 4); // leader epoch, magic, crc
        assert_eq!(batch.get_i16(), 0, "attributes");
        batch.advance(4 + 8 + 8 + 8 + 2 + 4);
        let count = batch.get_i32();
        for _ in 0..count {
            let len = varint(&mut batch) as usize;
            let mut record = batch.split_to(len);
            record.advance(1);
            varint(&mut record); // timestamp delta
            let offset_delta = varint(&mut record);
            let key_len = varint(&mut record) as usize;
            let key = record.split_to(key_len);
            let value_len = varint(&mut record);
            let value = (value_len >= 0).then(|| record.split_to(value_len as usize));
            out.push((base_offset + offset_delta, key, value));
        }
    }
    out
}

/// Fetch v12 of partition `partition` from `offset`: (error, high watermark, records).
pub fn fetch(
    client: &mut WireClient,
    partition: i32,
    offset: i64,
    max_wait_ms: i32,
) -> (i16, i64, Vec<Record>) {
    let request = FetchRequest {
        max_wait_ms,
        min_bytes: 1,
        topics: vec![FetchTopic {
            topic: NAME.into(),
            partitions: vec![FetchPartition {
                partition,
                fetch_offset: offset,
                partition_max_bytes: 1 << 20,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let Response::Fetch(fetched) = client.call(12, &request) else {
        panic!("not Fetch")
    };
    let answer = &fetched.responses[0].partitions[0];
    (
        answer.error_code,
        answer.high_watermark,
        records(answer.records.clone().unwrap_or_default()),
    )
}
