//! A bare Kafka Produce (v3, acks=all) on one TCP connection: which partitions of a topic
//! does this broker take a write for, right now?
//!
//! The takeover benchmark asks a broker that is taking partitions over, again and again,
//! until every partition has answered a produce without error. A real client would add its
//! own metadata refreshes and retry back-off to that time (librdkafka's back-off starts at
//! 100 ms and grows to 1 s), which would swamp what is measured; one request naming every
//! partition not yet served, repeated every few milliseconds, measures the broker alone.
//!
//! Wire format (Kafka protocol, big-endian): request header v1 (api key 0, version 3,
//! correlation id, client id), then transactional id (null), acks (-1), timeout, one topic
//! with one record batch per partition: a v2 batch of one record (no key, `value`), not
//! idempotent. Response v3: per partition its index, error code, base offset and log append
//! time, then the throttle time.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{bail, ensure, Context};

const PRODUCE_KEY: i16 = 0;
const PRODUCE_VERSION: i16 = 3;
/// Largest response accepted (10,000 partitions answer in ~200 KB).
const MAX_RESPONSE: usize = 64 << 20;

/// One connection to a broker.
pub struct ProduceProbe {
    stream: TcpStream,
    correlation: i32,
}

impl ProduceProbe {
    /// Connects to `address` (`host:port`).
    pub fn connect(address: &str) -> anyhow::Result<Self> {
        let stream =
            TcpStream::connect(address).with_context(|| format!("connecting to {address}"))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        Ok(ProduceProbe {
            stream,
            correlation: 0,
        })
    }

    /// Produces one record of `value` to each of `partitions` of `topic` in one request and
    /// returns each partition's error code (0: written and acknowledged by every replica).
    pub fn produce(
        &mut self,
        topic: &str,
        partitions: &[i32],
        value: &[u8],
    ) -> anyhow::Result<Vec<(i32, i16)>> {
        self.correlation = self.correlation.wrapping_add(1);
        let request = encode_request(self.correlation, topic, partitions, value);
        self.stream.write_all(&request)?;
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size)?;
        let size = i32::from_be_bytes(size);
        ensure!(
            (4..=MAX_RESPONSE as i32).contains(&size),
            "implausible response size {size}"
        );
        let mut body = vec![0u8; size as usize];
        self.stream.read_exact(&mut body)?;
        decode_response(&body, self.correlation)
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_varint(out: &mut Vec<u8>, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    loop {
        let byte = (zigzag & 0x7f) as u8;
        zigzag >>= 7;
        if zigzag == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// A record batch v2 holding one record with `value` and no key.
fn encode_batch(value: &[u8], timestamp_ms: i64) -> Vec<u8> {
    let mut record = Vec::with_capacity(value.len() + 8);
    record.push(0); // attributes
    put_varint(&mut record, 0); // timestamp delta
    put_varint(&mut record, 0); // offset delta
    put_varint(&mut record, -1); // no key
    put_varint(&mut record, value.len() as i64);
    record.extend_from_slice(value);
    put_varint(&mut record, 0); // no headers

    // Everything the CRC covers: attributes to the end.
    let mut tail = Vec::with_capacity(record.len() + 48);
    tail.extend_from_slice(&0i16.to_be_bytes()); // attributes: no compression
    tail.extend_from_slice(&0i32.to_be_bytes()); // last offset delta
    tail.extend_from_slice(&timestamp_ms.to_be_bytes());
    tail.extend_from_slice(&timestamp_ms.to_be_bytes());
    tail.extend_from_slice(&(-1i64).to_be_bytes()); // producer id
    tail.extend_from_slice(&(-1i16).to_be_bytes()); // producer epoch
    tail.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
    tail.extend_from_slice(&1i32.to_be_bytes()); // one record
    put_varint(&mut tail, record.len() as i64);
    tail.extend_from_slice(&record);

    let mut batch = Vec::with_capacity(tail.len() + 21);
    batch.extend_from_slice(&0i64.to_be_bytes()); // base offset
    let batch_length = 4 + 1 + 4 + tail.len(); // leader epoch, magic, CRC, the rest
    batch.extend_from_slice(&(batch_length as i32).to_be_bytes());
    batch.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    batch.push(2); // magic
    batch.extend_from_slice(&crc32c::crc32c(&tail).to_be_bytes());
    batch.extend_from_slice(&tail);
    batch
}

fn encode_request(correlation: i32, topic: &str, partitions: &[i32], value: &[u8]) -> Vec<u8> {
    let timestamp_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let batch = encode_batch(value, timestamp_ms);
    let mut out = Vec::with_capacity(64 + partitions.len() * (batch.len() + 8));
    out.extend_from_slice(&[0; 4]); // size, filled in below
    out.extend_from_slice(&PRODUCE_KEY.to_be_bytes());
    out.extend_from_slice(&PRODUCE_VERSION.to_be_bytes());
    out.extend_from_slice(&correlation.to_be_bytes());
    put_str(&mut out, "kaas-bench-takeover");
    out.extend_from_slice(&(-1i16).to_be_bytes()); // no transactional id
    out.extend_from_slice(&(-1i16).to_be_bytes()); // acks=all
    out.extend_from_slice(&30_000i32.to_be_bytes()); // timeout
    out.extend_from_slice(&1i32.to_be_bytes()); // one topic
    put_str(&mut out, topic);
    out.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
    for &partition in partitions {
        out.extend_from_slice(&partition.to_be_bytes());
        out.extend_from_slice(&(batch.len() as i32).to_be_bytes());
        out.extend_from_slice(&batch);
    }
    let size = (out.len() - 4) as i32;
    out[..4].copy_from_slice(&size.to_be_bytes());
    out
}

/// A cursor over a response body that fails instead of reading past its end.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> anyhow::Result<&[u8]> {
        ensure!(self.bytes.len() >= n, "truncated produce response");
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }
    fn i16(&mut self) -> anyhow::Result<i16> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into()?))
    }
    fn i32(&mut self) -> anyhow::Result<i32> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into()?))
    }
}

fn decode_response(body: &[u8], correlation: i32) -> anyhow::Result<Vec<(i32, i16)>> {
    let mut reader = Reader { bytes: body };
    let answered = reader.i32()?;
    if answered != correlation {
        bail!("response to request {answered}, expected {correlation}");
    }
    let topics = reader.i32()?;
    let mut errors = Vec::new();
    for _ in 0..topics.max(0) {
        let name_len = reader.i16()?;
        reader.take(name_len.max(0) as usize)?;
        let partitions = reader.i32()?;
        for _ in 0..partitions.max(0) {
            let index = reader.i32()?;
            let error = reader.i16()?;
            reader.take(16)?; // base offset, log append time
            errors.push((index, error));
        }
    }
    Ok(errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_carry_a_valid_crc_and_length() {
        let batch = encode_batch(b"hello", 1_700_000_000_000);
        let length = i32::from_be_bytes(batch[8..12].try_into().expect("length field")) as usize;
        assert_eq!(length + 12, batch.len());
        let crc = u32::from_be_bytes(batch[17..21].try_into().expect("crc field"));
        assert_eq!(crc, crc32c::crc32c(&batch[21..]));
        assert!(batch.ends_with(b"hello\x00"));
    }

    #[test]
    fn responses_decode_and_truncation_fails() {
        let mut body = Vec::new();
        body.extend_from_slice(&7i32.to_be_bytes());
        body.extend_from_slice(&1i32.to_be_bytes());
        put_str(&mut body, "t");
        body.extend_from_slice(&2i32.to_be_bytes());
        for (index, error) in [(0i32, 0i16), (1, 6)] {
            body.extend_from_slice(&index.to_be_bytes());
            body.extend_from_slice(&error.to_be_bytes());
            body.extend_from_slice(&[0; 16]);
        }
        body.extend_from_slice(&0i32.to_be_bytes());
        assert_eq!(
            decode_response(&body, 7).expect("decodes"),
            vec![(0, 0), (1, 6)]
        );
        assert!(decode_response(&body, 8).is_err());
        assert!(decode_response(&body[..body.len() - 10], 7).is_err());
    }
}
