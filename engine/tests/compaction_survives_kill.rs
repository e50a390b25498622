//! Property: `kill -9` at any point of a compaction pass — reading, writing the cleaned
//! copy, or swapping it in — leaves a log whose latest record of every key is what it was
//! before the pass.
//!
//! Each round the test appends batches with repeated keys and tombstones (plain and
//! compressed) to a log on disk, rolls and closes it, and records the model: every record
//! by offset. The first rounds run at fence epoch 0; each later round first takes the log
//! over at the next epoch, so its cleaner works on inherited segments (hard links bounded
//! by the claim record) and adopts its copies, and a kill can land between a swap and the
//! adoption. Then it runs this test binary again as a cleaner process that passes over
//! the log again and again with its I/O throttled (so a pass takes a while and holds many
//! swaps), printing a line once it has started, and kills it with SIGKILL a random
//! 1–400 ms later. Each cleaner process starts where the previous one's last pass ended,
//! from the log's cleaner checkpoint (so a kill can also land while it is written, and a
//! wrong checkpoint would let a tombstone go while an older value of its key stays). The
//! test reopens the log (recovery completes or rolls back an interrupted swap) and checks
//! that
//!
//! - every record read is the model's record at its offset, offsets increase, the log
//!   start and end are unchanged;
//! - the latest value of every key is there at its offset; a key whose latest record is a
//!   tombstone has that tombstone or nothing, and never an older value;
//! - no `.cleaned` file is left, and the cleaner checkpoint, when there is one, reads whole
//!   and names an offset within the log.
//!
//! The seed is printed and can be replayed with `KAAS_COMPACTION_KILL_SEED`.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kaas_engine::batch::{self, recompress::recompress_batches};
use kaas_engine::compaction::{self, CleanerConfig, CompactionConfig, Throttle};
use kaas_engine::compression::{self, Codec, CompressionTarget};
use kaas_engine::{LogConfig, PartitionLog};
use rand::{Rng, SeedableRng};

use common::partition_dir;

const CHILD_ROOT: &str = "KAAS_COMPACTION_KILL_ROOT";
const CHILD_EPOCH: &str = "KAAS_COMPACTION_KILL_EPOCH";
const SEED: &str = "KAAS_COMPACTION_KILL_SEED";
const ROUNDS: u64 = 8;
/// Rounds up to this one run at fence epoch 0; each later one takes the log over at the
/// next epoch first, so its cleaner works on inherited segments and adopts its copies.
const STANDALONE_ROUNDS: u64 = 4;
const KEYS: u64 = 40;
const TEST_NAME: &str = "compaction_survives_kill";

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 16 << 10,
        segment_age: Duration::from_secs(3_600),
        index_interval_bytes: 1_024,
        write_chunk_bytes: 16 << 10,
        preallocate_step: 1 << 20,
        retention_age: None,
        compaction: Some(CompactionConfig {
            min_cleanable_dirty_ratio: 0.0,
            delete_retention: Duration::from_millis(50),
            ..CompactionConfig::default()
        }),
        ..LogConfig::default()
    }
}

#[test]
fn compaction_survives_kill() {
    if let Ok(root) = std::env::var(CHILD_ROOT) {
        let epoch = std::env::var(CHILD_EPOCH)
            .ok()
            .and_then(|e| e.parse().ok())
            .unwrap_or(0);
        cleaner(PathBuf::from(root), epoch);
        return;
    }
    let seed = std::env::var(SEED)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    eprintln!("{SEED}={seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    let mut model: BTreeMap<u64, (Vec<u8>, Option<Vec<u8>>)> = BTreeMap::new();
    for round in 1..=ROUNDS {
        let batches: Vec<(Vec<(u64, bool)>, u8)> = (0..rng.random_range(20..60))
            .map(|_| {
                let records = (0..rng.random_range(1..8))
                    .map(|_| (rng.random_range(0..KEYS), rng.random_bool(0.15)))
                    .collect();
                (records, rng.random_range(0..5u8))
            })
            .collect();
        let epoch = round.saturating_sub(STANDALONE_ROUNDS) as u32;
        append_round(&root, round, epoch, &batches, &mut model);
        let delay = Duration::from_millis(rng.random_range(1..=400));
        common::child_writer::run_and_kill(
            TEST_NAME,
            &[
                (CHILD_ROOT, root.display().to_string()),
                (CHILD_EPOCH, epoch.to_string()),
            ],
            &root.join(format!("cleaner-{round}.stderr")),
            round,
            delay,
            |line| line.trim_end().ends_with("cleaning"),
        );
        let passes = std::fs::read_to_string(root.join(format!("cleaner-{round}.stderr")))
            .unwrap_or_default();
        eprintln!(
            "round {round}: killed {delay:?} after the cleaner started ({} bytes of its log)",
            passes.len()
        );
        verify(&root, round, epoch, &model);
    }
}

/// Appends one round's batches, rolls, closes; adds them to the model.
fn append_round(
    root: &Path,
    round: u64,
    epoch: u32,
    batches: &[(Vec<(u64, bool)>, u8)],
    model: &mut BTreeMap<u64, (Vec<u8>, Option<Vec<u8>>)>,
) {
    let root = root.to_path_buf();
    let batches = batches.to_vec();
    let (sender, receiver) = std::sync::mpsc::channel();
    common::run(move || async move {
        let storage = common::disk_storage(&root).await;
        let log = PartitionLog::open_at_epoch(&storage, &partition_dir(), config(), epoch)
            .await
            .expect("open");
        let mut added = Vec::new();
        for (i, (records, codec)) in batches.iter().enumerate() {
            let base = log.offsets().log_end_offset;
            let keys: Vec<Vec<u8>> = records
                .iter()
                .map(|(k, _)| format!("key-{k}").into_bytes())
                .collect();
            let values: Vec<Option<Vec<u8>>> = records
                .iter()
                .enumerate()
                .map(|(j, (k, tombstone))| {
                    (!tombstone)
                        .then(|| format!("r{round}-b{i}-{j}-{k}-{}", "x".repeat(40)).into_bytes())
                })
                .collect();
            let pairs: Vec<batch::TestRecord<'_>> = keys
                .iter()
                .zip(&values)
                .map(|(k, v)| (Some(k.as_slice()), v.as_deref()))
                .collect();
            let plain = batch::encode_batch_for_tests(&pairs, 1_000, -1, 0, -1);
            let target = CompressionTarget {
                codec: Codec::from_id(*codec).unwrap_or(Codec::None),
                level: None,
            };
            let produced = recompress_batches(&plain, target, 1 << 20)
                .expect("recompress")
                .unwrap_or(plain);
            log.append_durable(&produced, 0, 1_000)
                .await
                .expect("append");
            for (j, (key, value)) in keys.into_iter().zip(values).enumerate() {
                added.push((base + j as u64, key, value));
            }
        }
        let mut config = log.config();
        config.segment_bytes = 1;
        log.set_config(config);
        log.roll_if_aged(1_000).await.expect("roll");
        log.close().await.expect("close");
        sender.send(added).expect("send");
    });
    for (offset, key, value) in receiver.recv().expect("appended") {
        model.insert(offset, (key, value));
    }
}

/// The cleaner process: passes over the log until killed.
fn cleaner(root: PathBuf, epoch: u32) {
    common::run(move || async move {
        let storage = common::disk_storage(&root).await;
        let log = PartitionLog::open_at_epoch(&storage, &partition_dir(), config(), epoch)
            .await
            .expect("open");
        let cleaner = CleanerConfig {
            dedupe_buffer_bytes: 64 << 10,
            ..CleanerConfig::default()
        };
        let config = log.config().compaction.expect("compacted");
        {
            // Straight to the pipe: the test harness captures `println!`.
            use std::io::Write;
            let mut out = std::io::stdout();
            out.write_all(b"cleaning\n").expect("stdout");
            out.flush().expect("stdout");
        }
        let mut first_dirty = compaction::load_checkpoint(&log)
            .await
            .expect("checkpoint")
            .cleaned_up_to;
        let mut now = kaas_engine::log_manager::now_ms();
        loop {
            let throttle = Throttle::new(Some(400 << 10));
            let outcome =
                compaction::clean_log(&log, first_dirty, &config, &cleaner, &throttle, now)
                    .await
                    .expect("clean");
            if let Some(outcome) = outcome {
                eprintln!("pass: {outcome:?}");
                first_dirty = outcome.cleaned_up_to;
                if outcome.segments_swapped == 0 {
                    first_dirty = 0;
                }
            }
            now += 100;
        }
    });
}

fn verify(root: &Path, round: u64, epoch: u32, model: &BTreeMap<u64, (Vec<u8>, Option<Vec<u8>>)>) {
    let root = root.to_path_buf();
    let model = model.clone();
    common::run(move || async move {
        let storage = common::disk_storage(&root).await;
        let log = PartitionLog::open_at_epoch(&storage, &partition_dir(), config(), epoch)
            .await
            .expect("reopen after the kill");
        let leftovers: Vec<String> = std::fs::read_dir(root.join(partition_dir()))
            .expect("list")
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .filter(|name| name.ends_with(".cleaned"))
            .collect();
        assert!(
            leftovers.is_empty(),
            "round {round}: left over: {leftovers:?}"
        );
        if epoch > 0 {
            let record = root
                .join(partition_dir())
                .join(format!("claims/{epoch:020}.end"));
            let record = std::fs::read(record).expect("claim record");
            let record = kaas_engine::fence::ClaimRecord::decode(&record).expect("claim record");
            let adopted = record.segments.iter().filter(|(_, len)| *len == u64::MAX);
            eprintln!(
                "round {round}: epoch {epoch}, {} of {} inherited segments adopted",
                adopted.count(),
                record.segments.len()
            );
        }
        let checkpoint_name = match epoch {
            0 => "cleaner-offset-checkpoint".to_owned(),
            epoch => format!("cleaner-offset-checkpoint-e{epoch}"),
        };
        let checkpoint_file = root.join(partition_dir()).join(checkpoint_name);
        if let Ok(bytes) = std::fs::read(&checkpoint_file) {
            let checkpoint = compaction::CleanerCheckpoint::decode(&bytes)
                .unwrap_or_else(|error| panic!("round {round}: torn checkpoint: {error}"));
            assert!(
                checkpoint.cleaned_up_to <= log.offsets().log_end_offset,
                "round {round}: {checkpoint:?}"
            );
        }
        let offsets = log.offsets();
        let end = model.keys().next_back().map_or(0, |o| o + 1);
        assert_eq!((offsets.log_start_offset, offsets.log_end_offset), (0, end));
        let mut read: Vec<(u64, Vec<u8>, Option<Vec<u8>>)> = Vec::new();
        let mut offset = 0;
        while offset < offsets.high_watermark {
            let fetched = log.read(offset, 1 << 16).await.expect("read");
            let mut next = offset;
            for chunk in &fetched.chunks {
                for found in batch::scan_batches(chunk, 0) {
                    let header = found.header;
                    let bytes = &chunk[found.position as usize..][..found.total_len];
                    let mut plain = Vec::new();
                    compression::decompress(
                        header.codec().expect("codec"),
                        &bytes[batch::BATCH_HEADER_LEN..],
                        &mut plain,
                        1 << 24,
                    )
                    .expect("decompress");
                    for record in
                        compaction::records::walk(&plain, header.records_count).expect("records")
                    {
                        let at = header.base_offset as u64 + record.offset_delta as u64;
                        if at >= offset {
                            let value = (!record.tombstone).then(|| value_of(record.body));
                            read.push((at, record.key.expect("key").to_vec(), value));
                        }
                    }
                    next = next.max(header.next_offset() as u64);
                }
            }
            assert!(next > offset, "round {round}: no progress at {offset}");
            offset = next;
        }
        let mut previous = None;
        for (at, key, value) in &read {
            assert!(
                previous.is_none_or(|p| *at > p),
                "round {round}: offsets increase"
            );
            previous = Some(*at);
            let (model_key, model_value) = model.get(at).expect("a produced offset");
            assert_eq!(
                (key, value),
                (model_key, model_value),
                "round {round}: record at {at}"
            );
        }
        let mut latest: BTreeMap<&Vec<u8>, (u64, &Option<Vec<u8>>)> = BTreeMap::new();
        for (at, (key, value)) in &model {
            latest.insert(key, (*at, value));
        }
        for (key, (at, value)) in latest {
            let present = read.iter().any(|(o, _, _)| *o == at);
            let older = read.iter().any(|(o, k, _)| k == key && *o < at);
            let name = String::from_utf8_lossy(key);
            assert!(
                present || value.is_none(),
                "round {round}: latest of {name} at {at} lost"
            );
            assert!(
                present || !older,
                "round {round}: an older value of deleted {name} came back"
            );
        }
        log.close().await.expect("close");
    });
}

/// The value bytes of a record body (attributes, timestamp delta, offset delta, key, value).
fn value_of(body: &[u8]) -> Vec<u8> {
    let varint = |pos: &mut usize| -> i64 {
        let mut raw = 0u64;
        let mut shift = 0;
        loop {
            let byte = body[*pos];
            *pos += 1;
            raw |= u64::from(byte & 0x7f) << shift;
            shift += 7;
            if byte & 0x80 == 0 {
                break;
            }
        }
        ((raw >> 1) as i64) ^ -((raw & 1) as i64)
    };
    let mut pos = 1;
    varint(&mut pos);
    varint(&mut pos);
    let key_len = varint(&mut pos);
    pos += key_len.max(0) as usize;
    let value_len = varint(&mut pos);
    body[pos..pos + value_len as usize].to_vec()
}
