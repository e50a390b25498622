//! The record format of a consumer group's `offsets.log`.
//!
//! The file is a sequence of records, back to back, all integers big-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 4 | body length `L` (at most [`MAX_RECORD_BODY`]) |
//! | 4 | CRC-32 (IEEE, `crc32fast`) of the 4 length bytes followed by the body |
//! | `L` | body |
//!
//! The first record is the header, and only the first:
//!
//! | bytes | field |
//! |---|---|
//! | 1 | kind `1` (header) |
//! | 4 | magic `KGS1` |
//! | 2 | format version (1 or 2) |
//! | 4 | group id length `n` |
//! | `n` | group id, UTF-8 |
//!
//! Every later record is one batch of changes, written by one `apply` and therefore atomic:
//!
//! | bytes | field |
//! |---|---|
//! | 1 | kind `2` (changes) |
//! | 4 | change count |
//! | … | the changes, each a tag byte then its fields |
//!
//! | tag | change | fields | versions |
//! |---|---|---|---|
//! | 1 | commit | topic, partition `i32`, offset `i64`, leader epoch `i32`, metadata string, commit timestamp `i64` (ms) | 1, 2 |
//! | 2 | delete offset | topic, partition `i32` | 1, 2 |
//! | 3 | group metadata | blob (empty: no metadata) | 1, 2 |
//! | 4 | remove topic | topic | 1, 2 |
//! | 5 | pending transactional commit | producer id `i64`, producer epoch `i16`, then a commit's fields: topic, partition `i32`, offset `i64`, leader epoch `i32`, metadata string, commit timestamp `i64` (ms) | 2 |
//! | 6 | transaction completed | producer id `i64`, producer epoch `i16`, result `u8` (1 commit, 0 abort) | 2 |
//!
//! Strings and blobs are a 4-byte length followed by the bytes; strings are UTF-8.
//!
//! # Versions
//! Version 1 knows tags 1–4. Version 2 adds the transactional offset commits (tags 5 and
//! 6; what they mean is in [`GroupChange`]). Both are read; a file of version 1 holds tags
//! 1–4 only (a tag 5 or 6 in it is malformed, like an unknown tag).
//!
//! A file is written at the lowest version that holds what it is written with: a new file,
//! and a compacted one without pending transactional offsets, at version 1; a compacted one
//! with some at version 2. A flush about to append a tag 5 or 6 to a version-1 file first
//! rewrites the file whole at version 2 (as a compaction does: temporary file, fsync,
//! rename, directory fsync). So a file never holds records its header does not announce,
//! and a broker that knows only version 1 refuses a file that needs version 2 for its
//! header instead of cutting it at the first record it cannot read, while the files of
//! groups that never saw a transactional commit stay readable by it.
//!
//! A record is valid when its length fits in [`MAX_RECORD_BODY`] and in the bytes present,
//! its CRC matches and its body decodes exactly (no bytes left over, no unknown tag or
//! kind, valid UTF-8). The CRC covers the length, so a flipped length bit is caught even
//! when the length still looks plausible. Recovery keeps every record up to the first
//! invalid one and cuts the file there; a length never drives an allocation beyond the
//! bytes present. A header with a newer version is refused rather than cut.

use bytes::Bytes;

use super::{CommittedOffset, GroupChange};

/// Largest body of one record: bounds what a corrupt length can make recovery look at, and
/// the size of one `apply`.
pub const MAX_RECORD_BODY: usize = 16 << 20;
/// Length and CRC in front of every body.
pub const RECORD_OVERHEAD: usize = 8;
/// Bodies of a compacted file are cut at about this size.
const SNAPSHOT_CHUNK: usize = 1 << 20;

const KIND_HEADER: u8 = 1;
const KIND_CHANGES: u8 = 2;
const MAGIC: &[u8; 4] = b"KGS1";
/// The newest format version.
pub const VERSION: u16 = 2;
/// The oldest format version read.
pub const FIRST_VERSION: u16 = 1;

const TAG_COMMIT: u8 = 1;
const TAG_DELETE_OFFSET: u8 = 2;
const TAG_METADATA: u8 = 3;
const TAG_REMOVE_TOPIC: u8 = 4;
const TAG_PENDING_COMMIT: u8 = 5;
const TAG_COMPLETE_TRANSACTION: u8 = 6;

/// One change as stored: what the coordinator sends plus the engine's own topic removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A change from the coordinator.
    Group(GroupChange),
    /// Every offset of a deleted topic goes.
    RemoveTopic(String),
}

impl Change {
    /// The first format version that can hold this change.
    pub fn min_version(&self) -> u16 {
        match self {
            Change::Group(GroupChange::PendingCommit { .. })
            | Change::Group(GroupChange::CompleteTransaction { .. }) => 2,
            _ => FIRST_VERSION,
        }
    }
}

/// What a header record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The group the file belongs to.
    pub group_id: String,
    /// The format version of the file's records.
    pub version: u16,
}

/// Why bytes are not a valid record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordError {
    /// Fewer bytes than the record claims (a torn write).
    Torn,
    /// The length is beyond [`MAX_RECORD_BODY`].
    TooLong(usize),
    /// The CRC does not match.
    Checksum,
    /// The body does not decode.
    Malformed(&'static str),
    /// A header of a newer format version.
    UnknownVersion(u16),
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::Torn => write!(f, "torn record"),
            RecordError::TooLong(len) => write!(f, "record length {len} is implausible"),
            RecordError::Checksum => write!(f, "checksum mismatch"),
            RecordError::Malformed(what) => write!(f, "malformed record: {what}"),
            RecordError::UnknownVersion(v) => write!(f, "unknown format version {v}"),
        }
    }
}

/// Frames `body` as a record: length, CRC, body.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(RECORD_OVERHEAD + body.len());
    append_framed(&mut out, body);
    out
}

fn append_framed(out: &mut Vec<u8>, body: &[u8]) {
    let length = (body.len() as u32).to_be_bytes();
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&length);
    hasher.update(body);
    out.extend_from_slice(&length);
    out.extend_from_slice(&hasher.finalize().to_be_bytes());
    out.extend_from_slice(body);
}

/// Splits the first record off `bytes`: its body and the bytes it takes in all.
pub fn unframe(bytes: &[u8]) -> Result<(&[u8], usize), RecordError> {
    if bytes.len() < RECORD_OVERHEAD {
        return Err(RecordError::Torn);
    }
    let length = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
    if length > MAX_RECORD_BODY {
        return Err(RecordError::TooLong(length));
    }
    let total = RECORD_OVERHEAD + length;
    let Some(body) = bytes.get(RECORD_OVERHEAD..total) else {
        return Err(RecordError::Torn);
    };
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&bytes[..4]);
    hasher.update(body);
    if hasher.finalize().to_be_bytes() != bytes[4..8] {
        return Err(RecordError::Checksum);
    }
    Ok((body, total))
}

/// The header record naming `group_id`, of a file at format `version`.
pub fn encode_header(group_id: &str, version: u16) -> Vec<u8> {
    let mut body = Vec::with_capacity(11 + group_id.len());
    body.push(KIND_HEADER);
    body.extend_from_slice(MAGIC);
    body.extend_from_slice(&version.to_be_bytes());
    put_bytes(&mut body, group_id.as_bytes());
    frame(&body)
}

/// The group id and format version in a header body; a version newer than [`VERSION`]
/// (or older than [`FIRST_VERSION`]) is refused.
pub fn decode_header(body: &[u8]) -> Result<Header, RecordError> {
    let mut reader = Reader(body);
    if reader.u8()? != KIND_HEADER {
        return Err(RecordError::Malformed("the first record is not a header"));
    }
    if reader.take(4)? != MAGIC {
        return Err(RecordError::Malformed("bad magic"));
    }
    let version = reader.u16()?;
    if !(FIRST_VERSION..=VERSION).contains(&version) {
        return Err(RecordError::UnknownVersion(version));
    }
    let group_id = reader.string()?;
    reader.finish()?;
    Ok(Header { group_id, version })
}

/// The body of one batch of changes (not framed).
pub fn encode_changes(changes: &[Change]) -> Vec<u8> {
    let mut body = Vec::with_capacity(5 + changes.iter().map(change_len).sum::<usize>());
    body.push(KIND_CHANGES);
    body.extend_from_slice(&(changes.len() as u32).to_be_bytes());
    for change in changes {
        put_change(&mut body, change);
    }
    body
}

/// The changes in a body of a file at format `version`.
pub fn decode_changes(body: &[u8], version: u16) -> Result<Vec<Change>, RecordError> {
    let mut reader = Reader(body);
    if reader.u8()? != KIND_CHANGES {
        return Err(RecordError::Malformed("not a change record"));
    }
    let count = reader.u32()? as usize;
    // Every change takes at least 5 bytes, so the count cannot reserve more than that.
    let mut changes = Vec::with_capacity(count.min(reader.0.len() / 5));
    for _ in 0..count {
        let change = reader.change()?;
        if change.min_version() > version {
            return Err(RecordError::Malformed(
                "change tag newer than the file's version",
            ));
        }
        changes.push(change);
    }
    reader.finish()?;
    Ok(changes)
}

/// The lowest format version that holds `changes`.
pub fn version_for<'a>(changes: impl IntoIterator<Item = &'a Change>) -> u16 {
    changes
        .into_iter()
        .map(Change::min_version)
        .fold(FIRST_VERSION, u16::max)
}

/// A whole compacted file at format `version` (at least [`version_for`] `changes`): the
/// header, then `changes` in records of about [`SNAPSHOT_CHUNK`] bytes. Each change must fit
/// in one record on its own.
pub fn encode_snapshot(group_id: &str, changes: &[Change], version: u16) -> Vec<u8> {
    let mut out = encode_header(group_id, version);
    let mut chunk: Vec<&Change> = Vec::new();
    let mut chunk_len = 0;
    for change in changes {
        let len = change_len(change);
        if chunk_len + len > SNAPSHOT_CHUNK && !chunk.is_empty() {
            append_changes_record(&mut out, &chunk, chunk_len);
            chunk.clear();
            chunk_len = 0;
        }
        chunk_len += len;
        chunk.push(change);
    }
    if !chunk.is_empty() {
        append_changes_record(&mut out, &chunk, chunk_len);
    }
    out
}

fn append_changes_record(out: &mut Vec<u8>, changes: &[&Change], changes_len: usize) {
    let mut body = Vec::with_capacity(5 + changes_len);
    body.push(KIND_CHANGES);
    body.extend_from_slice(&(changes.len() as u32).to_be_bytes());
    for change in changes {
        put_change(&mut body, change);
    }
    append_framed(out, &body);
}

/// Encoded size of one change inside a body.
pub fn change_len(change: &Change) -> usize {
    match change {
        Change::Group(GroupChange::Commit {
            topic, committed, ..
        }) => 1 + 4 + topic.len() + 4 + 8 + 4 + 4 + committed.metadata.len() + 8,
        Change::Group(GroupChange::DeleteOffset { topic, .. }) => 1 + 4 + topic.len() + 4,
        Change::Group(GroupChange::Metadata(blob)) => 1 + 4 + blob.len(),
        Change::RemoveTopic(topic) => 1 + 4 + topic.len(),
        Change::Group(GroupChange::PendingCommit {
            topic, committed, ..
        }) => 1 + 8 + 2 + 4 + topic.len() + 4 + 8 + 4 + 4 + committed.metadata.len() + 8,
        Change::Group(GroupChange::CompleteTransaction { .. }) => 1 + 8 + 2 + 1,
    }
}

/// Encoded size of a body holding `changes`.
pub fn body_len(changes: &[Change]) -> usize {
    5 + changes.iter().map(change_len).sum::<usize>()
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// A commit's fields: topic, partition, offset, leader epoch, metadata, timestamp.
fn put_commit(out: &mut Vec<u8>, topic: &str, partition: i32, committed: &CommittedOffset) {
    put_bytes(out, topic.as_bytes());
    out.extend_from_slice(&partition.to_be_bytes());
    out.extend_from_slice(&committed.offset.to_be_bytes());
    out.extend_from_slice(&committed.leader_epoch.to_be_bytes());
    put_bytes(out, committed.metadata.as_bytes());
    out.extend_from_slice(&committed.commit_timestamp_ms.to_be_bytes());
}

fn put_change(out: &mut Vec<u8>, change: &Change) {
    match change {
        Change::Group(GroupChange::Commit {
            topic,
            partition,
            committed,
        }) => {
            out.push(TAG_COMMIT);
            put_commit(out, topic, *partition, committed);
        }
        Change::Group(GroupChange::PendingCommit {
            producer_id,
            producer_epoch,
            topic,
            partition,
            committed,
        }) => {
            out.push(TAG_PENDING_COMMIT);
            out.extend_from_slice(&producer_id.to_be_bytes());
            out.extend_from_slice(&producer_epoch.to_be_bytes());
            put_commit(out, topic, *partition, committed);
        }
        Change::Group(GroupChange::CompleteTransaction {
            producer_id,
            producer_epoch,
            commit,
        }) => {
            out.push(TAG_COMPLETE_TRANSACTION);
            out.extend_from_slice(&producer_id.to_be_bytes());
            out.extend_from_slice(&producer_epoch.to_be_bytes());
            out.push(u8::from(*commit));
        }
        Change::Group(GroupChange::DeleteOffset { topic, partition }) => {
            out.push(TAG_DELETE_OFFSET);
            put_bytes(out, topic.as_bytes());
            out.extend_from_slice(&partition.to_be_bytes());
        }
        Change::Group(GroupChange::Metadata(blob)) => {
            out.push(TAG_METADATA);
            put_bytes(out, blob);
        }
        Change::RemoveTopic(topic) => {
            out.push(TAG_REMOVE_TOPIC);
            put_bytes(out, topic.as_bytes());
        }
    }
}

/// Reads fields off a body, checking each length against the bytes left.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], RecordError> {
        if self.0.len() < len {
            return Err(RecordError::Malformed("field runs past the record"));
        }
        let (head, rest) = self.0.split_at(len);
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], RecordError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, RecordError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, RecordError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, RecordError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn i16(&mut self) -> Result<i16, RecordError> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    fn i32(&mut self) -> Result<i32, RecordError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64, RecordError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    fn blob(&mut self) -> Result<&'a [u8], RecordError> {
        let len = self.u32()? as usize;
        self.take(len)
    }

    fn string(&mut self) -> Result<String, RecordError> {
        std::str::from_utf8(self.blob()?)
            .map(str::to_owned)
            .map_err(|_| RecordError::Malformed("string is not UTF-8"))
    }

    /// A commit's fields: topic, partition and the committed offset.
    fn commit(&mut self) -> Result<(String, i32, CommittedOffset), RecordError> {
        let topic = self.string()?;
        let partition = self.i32()?;
        let offset = self.i64()?;
        let leader_epoch = self.i32()?;
        let metadata = self.string()?;
        let commit_timestamp_ms = self.i64()?;
        let committed = CommittedOffset {
            offset,
            leader_epoch,
            metadata,
            commit_timestamp_ms,
        };
        Ok((topic, partition, committed))
    }

    fn change(&mut self) -> Result<Change, RecordError> {
        Ok(match self.u8()? {
            TAG_COMMIT => {
                let (topic, partition, committed) = self.commit()?;
                Change::Group(GroupChange::Commit {
                    topic,
                    partition,
                    committed,
                })
            }
            TAG_PENDING_COMMIT => {
                let producer_id = self.i64()?;
                let producer_epoch = self.i16()?;
                let (topic, partition, committed) = self.commit()?;
                Change::Group(GroupChange::PendingCommit {
                    producer_id,
                    producer_epoch,
                    topic,
                    partition,
                    committed,
                })
            }
            TAG_COMPLETE_TRANSACTION => {
                let producer_id = self.i64()?;
                let producer_epoch = self.i16()?;
                let commit = match self.u8()? {
                    0 => false,
                    1 => true,
                    _ => return Err(RecordError::Malformed("transaction result is not 0 or 1")),
                };
                Change::Group(GroupChange::CompleteTransaction {
                    producer_id,
                    producer_epoch,
                    commit,
                })
            }
            TAG_DELETE_OFFSET => {
                let topic = self.string()?;
                let partition = self.i32()?;
                Change::Group(GroupChange::DeleteOffset { topic, partition })
            }
            TAG_METADATA => {
                Change::Group(GroupChange::Metadata(Bytes::copy_from_slice(self.blob()?)))
            }
            TAG_REMOVE_TOPIC => Change::RemoveTopic(self.string()?),
            _ => return Err(RecordError::Malformed("unknown change tag")),
        })
    }

    fn finish(self) -> Result<(), RecordError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(RecordError::Malformed("bytes left after the last field"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn committed() -> impl Strategy<Value = CommittedOffset> {
        (any::<i64>(), any::<i32>(), ".{0,20}", any::<i64>()).prop_map(
            |(offset, leader_epoch, metadata, commit_timestamp_ms)| CommittedOffset {
                offset,
                leader_epoch,
                metadata,
                commit_timestamp_ms,
            },
        )
    }

    fn change() -> impl Strategy<Value = Change> {
        prop_oneof![
            (".{0,12}", any::<i32>(), committed()).prop_map(|(topic, partition, committed)| {
                Change::Group(GroupChange::Commit {
                    topic,
                    partition,
                    committed,
                })
            }),
            (".{0,12}", any::<i32>()).prop_map(|(topic, partition)| {
                Change::Group(GroupChange::DeleteOffset { topic, partition })
            }),
            proptest::collection::vec(any::<u8>(), 0..40)
                .prop_map(|blob| Change::Group(GroupChange::Metadata(Bytes::from(blob)))),
            ".{0,12}".prop_map(Change::RemoveTopic),
            (
                any::<i64>(),
                any::<i16>(),
                ".{0,12}",
                any::<i32>(),
                committed()
            )
                .prop_map(
                    |(producer_id, producer_epoch, topic, partition, committed)| {
                        Change::Group(GroupChange::PendingCommit {
                            producer_id,
                            producer_epoch,
                            topic,
                            partition,
                            committed,
                        })
                    }
                ),
            (any::<i64>(), any::<i16>(), any::<bool>()).prop_map(
                |(producer_id, producer_epoch, commit)| {
                    Change::Group(GroupChange::CompleteTransaction {
                        producer_id,
                        producer_epoch,
                        commit,
                    })
                }
            ),
        ]
    }

    proptest! {
        #[test]
        fn changes_round_trip(changes in proptest::collection::vec(change(), 0..20)) {
            let body = encode_changes(&changes);
            prop_assert_eq!(body.len(), body_len(&changes));
            let framed = frame(&body);
            let (unframed, used) = unframe(&framed).expect("valid record");
            prop_assert_eq!(used, framed.len());
            prop_assert_eq!(decode_changes(unframed, VERSION).expect("decodes"), changes.clone());
            // A version-1 file holds only what version 1 knows.
            let old = decode_changes(unframed, FIRST_VERSION);
            if changes.iter().all(|c| c.min_version() == FIRST_VERSION) {
                prop_assert_eq!(old.expect("decodes at version 1"), changes);
            } else {
                prop_assert!(old.is_err());
            }
        }

        #[test]
        fn header_round_trips(group_id in ".{0,300}") {
            let framed = encode_header(&group_id, VERSION);
            let (body, used) = unframe(&framed).expect("valid record");
            prop_assert_eq!(used, framed.len());
            let header = decode_header(body).expect("decodes");
            prop_assert_eq!(header.version, VERSION);
            prop_assert_eq!(header.group_id, group_id);
        }

        #[test]
        fn any_bit_flip_is_detected(
            changes in proptest::collection::vec(change(), 1..6),
            bit in any::<prop::sample::Index>(),
        ) {
            let mut framed = frame(&encode_changes(&changes));
            let bit = bit.index(framed.len() * 8);
            framed[bit / 8] ^= 1 << (bit % 8);
            let decoded = unframe(&framed).and_then(|(body, _)| decode_changes(body, VERSION));
            prop_assert!(decoded.is_err());
        }

        #[test]
        fn truncation_is_detected(
            changes in proptest::collection::vec(change(), 0..6),
            cut in any::<prop::sample::Index>(),
        ) {
            let framed = frame(&encode_changes(&changes));
            let cut = cut.index(framed.len());
            prop_assert_eq!(unframe(&framed[..cut]), Err(RecordError::Torn));
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok((body, used)) = unframe(&bytes) {
                prop_assert!(used <= bytes.len());
                let _ = decode_changes(body, VERSION);
                let _ = decode_header(body);
            }
            let _ = decode_changes(&bytes, VERSION);
            let _ = decode_header(&bytes);
        }

        #[test]
        fn snapshot_reads_back_in_order(
            changes in proptest::collection::vec(change(), 0..50),
        ) {
            let file = encode_snapshot("g", &changes, version_for(&changes));
            let (body, mut at) = unframe(&file).expect("header");
            let header = decode_header(body).expect("header");
            prop_assert_eq!(header.group_id, "g");
            prop_assert_eq!(header.version, version_for(&changes));
            let mut read = Vec::new();
            while at < file.len() {
                let (body, used) = unframe(&file[at..]).expect("record");
                read.extend(decode_changes(body, VERSION).expect("changes"));
                at += used;
            }
            prop_assert_eq!(read, changes);
        }
    }

    #[test]
    fn a_huge_length_is_refused_before_reading() {
        let mut bytes = vec![0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0];
        bytes.extend_from_slice(&[0; 16]);
        assert_eq!(
            unframe(&bytes),
            Err(RecordError::TooLong(u32::MAX as usize))
        );
    }

    #[test]
    fn a_huge_count_does_not_reserve_memory() {
        let mut body = vec![KIND_CHANGES];
        body.extend_from_slice(&u32::MAX.to_be_bytes());
        assert!(decode_changes(&body, VERSION).is_err());
    }

    #[test]
    fn golden_commit_bytes() {
        let change = Change::Group(GroupChange::Commit {
            topic: "t".into(),
            partition: 2,
            committed: CommittedOffset {
                offset: 7,
                leader_epoch: -1,
                metadata: "m".into(),
                commit_timestamp_ms: 9,
            },
        });
        let body = encode_changes(&[change]);
        let expected: Vec<u8> = [
            &[2u8, 0, 0, 0, 1][..],    // kind, count
            &[1, 0, 0, 0, 1, b't'],    // tag, topic
            &[0, 0, 0, 2],             // partition
            &[0, 0, 0, 0, 0, 0, 0, 7], // offset
            &[0xff, 0xff, 0xff, 0xff], // leader epoch
            &[0, 0, 0, 1, b'm'],       // metadata
            &[0, 0, 0, 0, 0, 0, 0, 9], // timestamp
        ]
        .concat();
        assert_eq!(body, expected);
        let framed = frame(&body);
        assert_eq!(&framed[..4], &(body.len() as u32).to_be_bytes());
    }

    #[test]
    fn golden_transactional_bytes() {
        let pending = Change::Group(GroupChange::PendingCommit {
            producer_id: 0x0102,
            producer_epoch: 3,
            topic: "t".into(),
            partition: 2,
            committed: CommittedOffset {
                offset: 7,
                leader_epoch: -1,
                metadata: "m".into(),
                commit_timestamp_ms: 9,
            },
        });
        let complete = Change::Group(GroupChange::CompleteTransaction {
            producer_id: 0x0102,
            producer_epoch: 4,
            commit: true,
        });
        let body = encode_changes(&[pending, complete]);
        let expected: Vec<u8> = [
            &[2u8, 0, 0, 0, 2][..],    // kind, count
            &[5],                      // tag: pending commit
            &[0, 0, 0, 0, 0, 0, 1, 2], // producer id
            &[0, 3],                   // producer epoch
            &[0, 0, 0, 1, b't'],       // topic
            &[0, 0, 0, 2],             // partition
            &[0, 0, 0, 0, 0, 0, 0, 7], // offset
            &[0xff, 0xff, 0xff, 0xff], // leader epoch
            &[0, 0, 0, 1, b'm'],       // metadata
            &[0, 0, 0, 0, 0, 0, 0, 9], // timestamp
            &[6],                      // tag: transaction completed
            &[0, 0, 0, 0, 0, 0, 1, 2], // producer id
            &[0, 4],                   // producer epoch
            &[1],                      // commit
        ]
        .concat();
        assert_eq!(body, expected);
        let mut bad_result = expected.clone();
        *bad_result.last_mut().expect("bytes") = 2;
        assert!(decode_changes(&bad_result, VERSION).is_err());
    }

    #[test]
    fn header_versions_one_and_two_are_read_and_newer_refused() {
        for version in [1u16, 2] {
            let framed = encode_header("g", version);
            let (body, _) = unframe(&framed).expect("valid record");
            assert_eq!(
                decode_header(body),
                Ok(Header {
                    group_id: "g".into(),
                    version
                })
            );
        }
        for version in [0u16, 3] {
            let framed = encode_header("g", version);
            let (body, _) = unframe(&framed).expect("valid record");
            assert_eq!(
                decode_header(body),
                Err(RecordError::UnknownVersion(version))
            );
        }
    }

    #[test]
    fn a_version_one_header_is_byte_for_byte_as_before() {
        let framed = encode_header("g", 1);
        let body: Vec<u8> = [&[1u8][..], b"KGS1", &[0, 1], &[0, 0, 0, 1, b'g']].concat();
        assert_eq!(framed, frame(&body));
    }
}
