#![allow(clippy::unwrap_used)]

use proptest::prelude::*;

use super::*;

fn entry(producer_id: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
    AbortedTxn {
        producer_id,
        first_offset: first,
        last_offset: last,
        last_stable_offset: lso,
    }
}

fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

/// Kafka's `AbortedTxn` (version 0) for producer 4242, offsets 100 to 250, last stable
/// offset 180, spelled out field by field from its schema.
const GOLDEN: &str = "0000 0000000000001092 0000000000000064 00000000000000fa 00000000000000b4";

#[test]
fn test_entry_matches_kafkas_bytes() {
    let aborted = entry(4242, 100, 250, 180);
    assert_eq!(aborted.encode().to_vec(), hex(GOLDEN));
    assert_eq!(
        AbortedTxn::decode(&aborted.encode()),
        Some(aborted),
        "round trip"
    );
    let mut newer = aborted.encode();
    newer[1] = 1;
    assert_eq!(AbortedTxn::decode(&newer), None);
}

#[test]
fn test_sealed_files_must_be_whole_and_plausible() {
    let entries = vec![entry(1, 5, 10, 11), entry(2, 3, 20, 5)];
    let bytes = encode_entries(&entries);
    assert_eq!(parse_sealed(&bytes, 10, 30), Ok(entries.clone()));
    assert_eq!(parse_sealed(&[], 10, 30), Ok(Vec::new()));
    assert!(parse_sealed(&bytes[..40], 10, 30).is_err(), "partial entry");
    // A marker outside the segment, out of order, or a last stable offset past the marker.
    assert!(parse_sealed(&bytes, 11, 30).is_err());
    assert!(parse_sealed(&bytes, 10, 20).is_err());
    let reversed = encode_entries(&[entries[1], entries[0]]);
    assert!(parse_sealed(&reversed, 10, 30).is_err());
    for bad in [
        entry(-1, 5, 10, 11),
        entry(1, 11, 10, 11),
        entry(1, 5, 10, 12),
        entry(1, -5, 10, 11),
    ] {
        assert!(parse_sealed(&bad.encode(), 10, 30).is_err(), "{bad:?}");
    }
    // Zeros (an entry whose pages never reached the disk) are implausible past offset 0.
    assert!(parse_sealed(&[0u8; TXN_INDEX_ENTRY_LEN], 10, 30).is_err());
}

#[test]
fn test_the_recovery_points_segment_keeps_entries_below_it() {
    let entries = vec![
        entry(1, 5, 10, 11),
        entry(2, 3, 20, 5),
        entry(3, 21, 25, 26),
    ];
    let mut bytes = encode_entries(&entries);
    assert_eq!(parse_below(&bytes, 10, 21), Ok(entries[..2].to_vec()));
    // A torn entry after them is what a crash after the recovery point leaves.
    bytes.extend_from_slice(&[0xab; 7]);
    assert_eq!(parse_below(&bytes, 10, 100), Ok(entries.clone()));
    // An implausible entry before the point is damage.
    let mut damaged = encode_entries(&entries);
    damaged[2 + TXN_INDEX_ENTRY_LEN] = 0x80; // producer id of the second entry < 0
    assert!(parse_below(&damaged, 10, 100).is_err());
}

#[test]
fn test_collect_stops_at_the_last_stable_offset() {
    let entries = [
        entry(1, 5, 10, 8),
        entry(2, 8, 12, 13),
        entry(3, 13, 15, 16),
    ];
    let mut out = Vec::new();
    // From 0 up to 13: the second entry's last stable offset reaches 13.
    assert!(collect(&entries, 0, 13, &mut out));
    assert_eq!(out, entries[..2].to_vec());
    out.clear();
    // From 11: the first transaction ended before it.
    assert!(!collect(&entries, 11, 100, &mut out));
    assert_eq!(out, entries[1..].to_vec());
    out.clear();
    // Up to 8: the second began at 8, not below.
    assert!(collect(&entries, 0, 8, &mut out));
    assert_eq!(out, entries[..1].to_vec());
}

#[test]
fn test_write_jobs_append_cut_and_remove() {
    let mut index = SegmentTxnIndex::default();
    assert_eq!(index.write_job(), TxnIndexWrite::Nothing);
    index.push(entry(1, 0, 3, 4));
    let first = index.write_job();
    assert_eq!(
        first,
        TxnIndexWrite::Append {
            bytes: entry(1, 0, 3, 4).encode().to_vec(),
            position: 0
        }
    );
    index.mark_written(1);
    assert_eq!(index.write_job(), TxnIndexWrite::Nothing);
    index.push(entry(2, 1, 7, 8));
    assert_eq!(
        index.write_job(),
        TxnIndexWrite::Append {
            bytes: entry(2, 1, 7, 8).encode().to_vec(),
            position: TXN_INDEX_ENTRY_LEN as u64
        }
    );
    // A file recovery found may hold dropped entries: cut it, or remove it when empty.
    let kept = SegmentTxnIndex::loaded(vec![entry(1, 0, 3, 4)], true);
    assert_eq!(
        kept.write_job(),
        TxnIndexWrite::Append {
            bytes: Vec::new(),
            position: TXN_INDEX_ENTRY_LEN as u64
        }
    );
    let mut emptied = SegmentTxnIndex::loaded(Vec::new(), true);
    assert_eq!(emptied.write_job(), TxnIndexWrite::Remove);
    emptied.mark_written(0);
    assert_eq!(emptied.write_job(), TxnIndexWrite::Nothing);
    assert_eq!(
        SegmentTxnIndex::loaded(Vec::new(), false).write_job(),
        TxnIndexWrite::Nothing
    );
}

fn arb_entries() -> impl Strategy<Value = Vec<AbortedTxn>> {
    proptest::collection::vec((0..1_000i64, 0..50i64, 1..40i64, 0..60i64), 0..20).prop_map(
        |steps| {
            let mut last = 100i64;
            steps
                .into_iter()
                .map(|(producer_id, back, step, lso_back)| {
                    last += step;
                    entry(
                        producer_id,
                        (last - back).max(0),
                        last,
                        (last + 1 - lso_back).max(0),
                    )
                })
                .collect()
        },
    )
}

proptest! {
    #[test]
    fn prop_sealed_files_round_trip(entries in arb_entries()) {
        let bytes = encode_entries(&entries);
        prop_assert_eq!(parse_sealed(&bytes, 100, u64::MAX), Ok(entries.clone()));
        prop_assert_eq!(parse_below(&bytes, 100, u64::MAX), Ok(entries));
    }

    #[test]
    fn prop_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = parse_sealed(&bytes, 0, 1 << 20);
        let _ = parse_below(&bytes, 0, 1 << 20);
    }
}
