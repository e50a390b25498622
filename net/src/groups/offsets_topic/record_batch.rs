//! One `__consumer_offsets` record as a RecordBatch v2, the format Fetch returns.
//!
//! Layout (big-endian): base offset `i64`, batch length `i32` (bytes after this field),
//! partition leader epoch `i32`, magic `i8` = 2, CRC-32C `u32` of everything after it,
//! attributes `i16` = 0 (no compression, CreateTime, not transactional), last offset delta
//! `i32` = 0, base and max timestamp `i64`, producer id `i64` = -1, producer epoch `i16` = -1,
//! base sequence `i32` = -1, record count `i32` = 1, then the record: length, attributes,
//! timestamp delta, offset delta, key length and key, value length (-1 for a tombstone) and
//! value, header count — each a zigzag varint but the attributes byte.

use bytes::{BufMut, Bytes, BytesMut};

/// Bytes before the CRC-covered part: base offset, length, leader epoch, magic, CRC.
const CRC_START: usize = 8 + 4 + 4 + 1 + 4;

fn put_varint(out: &mut BytesMut, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    while zigzag >= 0x80 {
        out.put_u8((zigzag as u8) | 0x80);
        zigzag >>= 7;
    }
    out.put_u8(zigzag as u8);
}

fn encode_record(key: &[u8], value: Option<&[u8]>) -> BytesMut {
    let mut body = BytesMut::with_capacity(16 + key.len() + value.map_or(0, <[u8]>::len));
    body.put_i8(0); // attributes
    put_varint(&mut body, 0); // timestamp delta
    put_varint(&mut body, 0); // offset delta
    put_varint(&mut body, key.len() as i64);
    body.put_slice(key);
    match value {
        Some(value) => {
            put_varint(&mut body, value.len() as i64);
            body.put_slice(value);
        }
        None => put_varint(&mut body, -1),
    }
    put_varint(&mut body, 0); // headers
    body
}

/// A batch holding one record at `offset`, stamped with `leader_epoch`.
pub fn single_record_batch(
    offset: i64,
    leader_epoch: i32,
    timestamp_ms: i64,
    key: &[u8],
    value: Option<&[u8]>,
) -> Bytes {
    let record = encode_record(key, value);
    let mut record_len = BytesMut::with_capacity(5);
    put_varint(&mut record_len, record.len() as i64);
    let after_crc = 2 + 4 + 8 + 8 + 8 + 2 + 4 + 4 + record_len.len() + record.len();
    let mut out = BytesMut::with_capacity(CRC_START + after_crc);
    out.put_i64(offset);
    out.put_i32((4 + 1 + 4 + after_crc) as i32);
    out.put_i32(leader_epoch);
    out.put_i8(2);
    out.put_u32(0); // CRC, filled in below
    out.put_i16(0);
    out.put_i32(0);
    out.put_i64(timestamp_ms);
    out.put_i64(timestamp_ms);
    out.put_i64(-1);
    out.put_i16(-1);
    out.put_i32(-1);
    out.put_i32(1);
    out.put_slice(&record_len);
    out.put_slice(&record);
    let crc = crc32c::crc32c(&out[CRC_START..]);
    out[CRC_START - 4..CRC_START].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_valid_kafka_batches() {
        for value in [Some(&b"value"[..]), None] {
            let batch = single_record_batch(42, 0, 1_700_000_000_000, b"key", value);
            // The engine's produce-side check: framing, CRC-32C, counts, every record.
            let summaries =
                kaas_engine::batch::validate_batches(&batch, 1 << 20).expect("a valid batch");
            assert_eq!(summaries.len(), 1);
            assert_eq!(summaries[0].range, 0..batch.len());
            assert_eq!(summaries[0].record_count, 1);
            assert_eq!(summaries[0].header.base_offset, 42);
            assert_eq!(summaries[0].header.max_timestamp, 1_700_000_000_000);
        }
    }

    #[test]
    fn varints_are_zigzag() {
        let mut out = BytesMut::new();
        for value in [0, -1, 1, 63, -64, 64, 300] {
            put_varint(&mut out, value);
        }
        assert_eq!(
            &out[..],
            &[0x00, 0x01, 0x02, 0x7e, 0x7f, 0x80, 0x01, 0xd8, 0x04]
        );
    }
}
