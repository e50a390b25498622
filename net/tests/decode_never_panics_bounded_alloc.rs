//! Decoding arbitrary bytes never panics, and the memory it holds at any moment stays within
//! a small multiple of the frame size: random frames, every truncation and every single-bit
//! flip of valid frames for every served API and version.
//!
//! Bound checked here (and stated in net/README.md, "Memory bound per request"): peak live
//! heap while decoding one frame is at most `ALLOC_FACTOR` × frame length + `ALLOC_SLACK` bytes.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::{Bytes, BytesMut};
use kaas_net::protocol::frame::sample_pair;
use kaas_net::protocol::sample::SampleRng;
use kaas_net::protocol::{self as codec, RequestHeader, SUPPORTED_APIS};

const ALLOC_FACTOR: usize = 48;
const ALLOC_SLACK: usize = 1024;

struct Counting;

thread_local! {
    static TRACKING: Cell<bool> = const { Cell::new(false) };
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn track(delta: isize) {
    let _ = TRACKING.try_with(|tracking| {
        if tracking.get() {
            LIVE.with(|live| {
                let now = live.get() + delta;
                live.set(now);
                PEAK.with(|peak| peak.set(peak.get().max(now)));
            });
        }
    });
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        track(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        track(-(layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        track(new_size as isize - layout.size() as isize);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Decodes `frame` and returns the peak heap held during the decode, in bytes.
fn decode_measured(frame: Bytes) -> usize {
    LIVE.with(|live| live.set(0));
    PEAK.with(|peak| peak.set(0));
    TRACKING.with(|t| t.set(true));
    let result = codec::decode_request(frame);
    drop(result);
    TRACKING.with(|t| t.set(false));
    PEAK.with(|peak| peak.get()).max(0) as usize
}

struct Stats {
    frames: usize,
    worst_ratio: f64,
}

fn check(frame: Bytes, stats: &mut Stats) {
    let len = frame.len();
    let peak = decode_measured(frame.clone());
    let bound = ALLOC_FACTOR * len + ALLOC_SLACK;
    assert!(
        peak <= bound,
        "frame of {len} bytes held {peak} bytes while decoding: {:02x?}",
        &frame[..]
    );
    stats.frames += 1;
    if len > 64 {
        stats.worst_ratio = stats.worst_ratio.max(peak as f64 / len as f64);
    }
}

fn valid_frames(seed: u64) -> Vec<Bytes> {
    let mut out = Vec::new();
    for range in SUPPORTED_APIS {
        for version in range.min_version..=range.max_version {
            let mut rng = SampleRng::new(seed ^ ((range.api_key as u64) << 24) ^ version as u64);
            let (request, _) = sample_pair(range.api_key, version, &mut rng).expect("served");
            let header = RequestHeader {
                api_key: range.api_key,
                api_version: version,
                correlation_id: 3,
                client_id: Some("c".into()),
            };
            let mut frame = BytesMut::new();
            for chunk in request.encode_frame(&header) {
                frame.extend_from_slice(&chunk);
            }
            out.push(frame.freeze().slice(4..));
        }
    }
    out
}

#[test]
fn hostile_bytes_never_panic_and_allocation_stays_bounded() {
    let mut stats = Stats {
        frames: 0,
        worst_ratio: 0.0,
    };
    let mut rng = SampleRng::new(0x6b61_6173);

    for seed in 0..3u64 {
        for frame in valid_frames(seed) {
            // Every truncation.
            for cut in 0..frame.len() {
                check(frame.slice(..cut), &mut stats);
            }
            // Every single-bit flip (a sample of them in long frames).
            let bits = frame.len() * 8;
            let flips: Vec<usize> = if bits <= 4096 {
                (0..bits).collect()
            } else {
                (0..4096).map(|_| rng.below(bits as u64) as usize).collect()
            };
            for bit in flips {
                let mut bytes = BytesMut::from(&frame[..]);
                bytes[bit / 8] ^= 1 << (bit % 8);
                check(bytes.freeze(), &mut stats);
            }
            // Count-like bytes: 0xff / 0x7f runs at random places.
            for _ in 0..64 {
                let mut bytes = BytesMut::from(&frame[..]);
                let at = 8 + rng.below((bytes.len() - 8).max(1) as u64) as usize;
                for byte in bytes.iter_mut().skip(at).take(1 + rng.below(5) as usize) {
                    *byte = if rng.one_in(2) { 0xff } else { 0x7f };
                }
                check(bytes.freeze(), &mut stats);
            }
        }
    }

    // Random frames behind a valid header of a served API and version.
    for _ in 0..50_000 {
        let range = SUPPORTED_APIS[rng.below(SUPPORTED_APIS.len() as u64) as usize];
        let version = range.min_version
            + rng.below((range.max_version - range.min_version + 1) as u64) as i16;
        let mut bytes = BytesMut::new();
        bytes.extend_from_slice(&range.api_key.to_be_bytes());
        bytes.extend_from_slice(&version.to_be_bytes());
        bytes.extend_from_slice(&[0, 0, 0, 1, 0xff, 0xff]);
        if version >= range.first_flexible {
            bytes.extend_from_slice(&[0]);
        }
        let len = rng.below(200) as usize;
        bytes.extend((0..len).map(|_| rng.next_u64() as u8));
        check(bytes.freeze(), &mut stats);
    }
    // Entirely random frames.
    for _ in 0..10_000 {
        let len = rng.below(64) as usize;
        let bytes: Bytes = (0..len).map(|_| rng.next_u64() as u8).collect();
        check(bytes, &mut stats);
    }

    // Crafted worst cases: nested arrays whose counts claim everything that is left.
    for frame in nested_claims() {
        let len = frame.len();
        let peak = decode_measured(frame.clone());
        println!(
            "crafted frame of {len} bytes: peak {peak} ({:.1}x)",
            peak as f64 / len as f64
        );
        check(frame, &mut stats);
    }

    println!(
        "checked {} frames; worst peak/frame ratio for frames over 64 bytes: {:.2}",
        stats.frames, stats.worst_ratio
    );
}

fn uvarint(mut value: u32, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Frames whose outer array claims as many elements as the bytes left allow, and whose first
/// element holds an inner array of empty strings filling the rest of the frame.
fn nested_claims() -> Vec<Bytes> {
    let mut out = Vec::new();
    for padding in [1_000u32, 60_000] {
        // DescribeConfigs v4: resources[] -> configuration_keys[] (strings).
        let mut frame = vec![0, 32, 0, 4, 0, 0, 0, 1, 0xff, 0xff, 0];
        let outer = padding / 4;
        uvarint(outer + 1, &mut frame);
        frame.extend_from_slice(&[0, 1]);
        uvarint(padding + 1, &mut frame);
        frame.extend(std::iter::repeat_n(1u8, padding as usize));
        out.push(Bytes::from(frame));

        // DescribeGroups v5: groups[] (strings).
        let mut frame = vec![0, 15, 0, 5, 0, 0, 0, 1, 0xff, 0xff, 0];
        uvarint(padding + 1, &mut frame);
        frame.extend(std::iter::repeat_n(1u8, padding as usize));
        out.push(Bytes::from(frame));

        // OffsetFetch v9: groups[] -> topics[] -> partition_indexes[].
        let mut frame = vec![0, 9, 0, 9, 0, 0, 0, 1, 0xff, 0xff, 0];
        uvarint(padding / 8 + 1, &mut frame);
        frame.extend_from_slice(&[1, 0, 0, 0, 0, 0]);
        uvarint(padding / 3 + 1, &mut frame);
        frame.extend_from_slice(&[1]);
        uvarint(padding / 4 + 1, &mut frame);
        frame.extend(std::iter::repeat_n(0u8, padding as usize));
        out.push(Bytes::from(frame));
    }
    out
}
