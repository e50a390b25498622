use std::cell::Cell;
use std::future::Future;
use std::rc::Rc;

use bytes::Bytes;

use super::*;

fn run<F: Future<Output = ()> + 'static>(f: impl FnOnce() -> F + Send + 'static) {
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move { f().await })
        .expect("executor")
        .join()
        .expect("join");
}

/// Runs `test` once on in-memory storage and once on a scratch directory on disk.
fn on_both<F: Future<Output = ()> + 'static>(test: fn(Storage) -> F) {
    run(move || test(Storage::memory()));
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    run(move || async move {
        crate::dma_probe::prepare_executor(&root)
            .await
            .expect("probe");
        test(Storage::disk(root)).await
    });
}

fn commit(topic: &str, partition: i32, offset: i64) -> GroupChange {
    GroupChange::Commit {
        topic: topic.into(),
        partition,
        committed: committed(offset),
    }
}

fn committed(offset: i64) -> CommittedOffset {
    CommittedOffset {
        offset,
        leader_epoch: 3,
        metadata: format!("m{offset}"),
        commit_timestamp_ms: 1_000 + offset,
    }
}

#[test]
fn changes_survive_reopen() {
    on_both(|storage| async move {
        let store = GroupStore::open(&storage, "g").await.expect("open");
        assert!(store.is_empty());
        assert_eq!(store.group_id(), "g");
        store
            .apply(vec![
                commit("b", 1, 10),
                commit("a", 2, 20),
                commit("a", 0, 5),
                GroupChange::Metadata(Bytes::from_static(b"members")),
            ])
            .await
            .expect("apply");
        store
            .apply(vec![
                commit("a", 0, 6),
                GroupChange::DeleteOffset {
                    topic: "b".into(),
                    partition: 1,
                },
                commit("c", 7, 70),
            ])
            .await
            .expect("apply");
        store.remove_topic("c").await.expect("remove topic");
        store.remove_topic("never").await.expect("remove absent");
        let expected = vec![
            ("a".to_owned(), 0, committed(6)),
            ("a".to_owned(), 2, committed(20)),
        ];
        assert_eq!(store.offsets(), expected);
        assert_eq!(store.offset("a", 0), Some(committed(6)));
        assert_eq!(store.offset("b", 1), None);
        assert_eq!(store.metadata(), Some(Bytes::from_static(b"members")));
        drop(store);

        let reopened = GroupStore::open(&storage, "g").await.expect("reopen");
        assert_eq!(reopened.offsets(), expected);
        assert_eq!(reopened.metadata(), Some(Bytes::from_static(b"members")));
        reopened
            .apply(vec![GroupChange::Metadata(Bytes::new())])
            .await
            .expect("clear metadata");
        assert_eq!(reopened.metadata(), None);
        assert!(!reopened.is_empty());
        reopened.remove_topic("a").await.expect("remove");
        assert!(reopened.is_empty());
        drop(reopened);
        assert!(GroupStore::open(&storage, "g")
            .await
            .expect("reopen")
            .is_empty());
    });
}

#[test]
fn concurrent_applies_share_flushes() {
    on_both(|storage| async move {
        let store = GroupStore::open(&storage, "g").await.expect("open");
        let tasks: Vec<_> = (0..64)
            .map(|task| {
                let store = store.clone();
                glommio::spawn_local(async move {
                    store
                        .apply(vec![commit("t", task, i64::from(task) * 10)])
                        .await
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("apply");
        }
        assert!(
            store.flush_count() <= 4,
            "64 concurrent applies took {} flushes",
            store.flush_count()
        );
        assert_eq!(store.offsets().len(), 64);
        drop(store);
        let reopened = GroupStore::open(&storage, "g").await.expect("reopen");
        for task in 0..64 {
            assert_eq!(
                reopened.offset("t", task),
                Some(committed(i64::from(task) * 10))
            );
        }
    });
}

#[test]
fn a_million_commits_stay_small() {
    run(|| async {
        let storage = Storage::memory();
        let store = GroupStore::open(&storage, "g").await.expect("open");
        let mut largest = 0;
        for i in 0..1_000_000i64 {
            store
                .apply(vec![commit("topic", (i % 4) as i32, i)])
                .await
                .expect("apply");
            largest = largest.max(store.file_len());
        }
        assert!(largest <= 2 << 20, "the file reached {largest} bytes");
        assert!(store.compaction_count() > 10);
        let Storage::Memory(files) = &storage else {
            unreachable!()
        };
        assert_eq!(files.total_bytes() as u64, store.file_len());
        drop(store);
        let reopened = GroupStore::open(&storage, "g").await.expect("reopen");
        let expected: Vec<_> = (0..4)
            .map(|p| ("topic".to_owned(), p, committed(999_996 + i64::from(p))))
            .collect();
        assert_eq!(reopened.offsets(), expected);
    });
}

#[test]
fn applies_during_compaction_are_kept() {
    on_both(|storage| async move {
        let store = GroupStore::open(&storage, "g").await.expect("open");
        let big = "x".repeat(4_000);
        let tasks: Vec<_> = (0..16)
            .map(|task| {
                let store = store.clone();
                let big = big.clone();
                glommio::spawn_local(async move {
                    for i in 0..200 {
                        let change = GroupChange::Commit {
                            topic: format!("t{}", task % 3),
                            partition: task,
                            committed: CommittedOffset {
                                metadata: big.clone(),
                                ..committed(i)
                            },
                        };
                        store.apply(vec![change]).await.expect("apply");
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await;
        }
        assert!(store.compaction_count() >= 2, "the test never compacted");
        let expected = store.offsets();
        assert_eq!(expected.len(), 16);
        assert!(expected.iter().all(|(_, _, c)| c.offset == 199));
        drop(store);
        let reopened = GroupStore::open(&storage, "g").await.expect("reopen");
        assert_eq!(reopened.offsets(), expected);
    });
}

#[test]
fn odd_ids_list_and_delete() {
    on_both(|storage| async move {
        let long_slashes = "/".repeat(300);
        let long_unicode = "é".repeat(200);
        let ids: Vec<String> = [
            "",
            ".",
            "..",
            "/",
            "a/b",
            "%",
            "~",
            "g",
            "é",
            &long_slashes,
            &long_unicode,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for (n, id) in ids.iter().enumerate() {
            let store = GroupStore::open(&storage, id).await.expect("open");
            store
                .apply(vec![commit(id, 0, n as i64)])
                .await
                .expect("apply");
        }
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(GroupStore::list(&storage).await.expect("list"), sorted);
        for (n, id) in ids.iter().enumerate() {
            let store = GroupStore::open(&storage, id).await.expect("reopen");
            assert_eq!(store.group_id(), id);
            assert_eq!(store.offsets(), vec![(id.clone(), 0, committed(n as i64))]);
        }

        let doomed = GroupStore::open(&storage, "..").await.expect("open");
        doomed.delete().await.expect("delete");
        assert!(matches!(
            doomed.apply(vec![commit("t", 0, 1)]).await,
            Err(EngineError::Closed)
        ));
        assert!(doomed.offsets().is_empty());
        let listed = GroupStore::list(&storage).await.expect("list");
        assert_eq!(listed.len(), ids.len() - 1);
        assert!(!listed.contains(&"..".to_owned()));
        let fresh = GroupStore::open(&storage, "..").await.expect("recreate");
        assert!(fresh.is_empty());
    });
}

/// Disk storage in a fresh directory (kept alive by the returned guard).
async fn scratch_disk() -> (tempfile::TempDir, Storage) {
    let dir = tempfile::tempdir().expect("tempdir");
    crate::dma_probe::prepare_executor(dir.path())
        .await
        .expect("probe");
    let storage = Storage::disk(dir.path().to_path_buf());
    (dir, storage)
}

/// Starts applying a commit of `offset` in the background; the flag is set when it returns.
fn spawn_commit(store: &GroupStore, offset: i64) -> (glommio::Task<Result<()>>, Rc<Cell<bool>>) {
    let done = Rc::new(Cell::new(false));
    let task = {
        let store = store.clone();
        let done = done.clone();
        glommio::spawn_local(async move {
            let result = store.apply(vec![commit("t", 0, offset)]).await;
            done.set(true);
            result
        })
    };
    (task, done)
}

/// Yields until a flush is writing (true) or `task` is done (false).
async fn until_flushing(store: &GroupStore, done: &Cell<bool>) -> bool {
    loop {
        if store.shared.commit.is_running() {
            return true;
        }
        if done.get() {
            return false;
        }
        futures_lite::future::yield_now().await;
    }
}

#[test]
fn changes_are_invisible_until_durable() {
    run(|| async {
        let (_dir, storage) = scratch_disk().await;
        let store = GroupStore::open(&storage, "g").await.expect("open");
        let mut observed = 0;
        for attempt in 0..50 {
            let (task, done) = spawn_commit(&store, attempt);
            if until_flushing(&store, &done).await && !done.get() {
                observed += 1;
                let visible = store.offset("t", 0).map(|c| c.offset);
                assert_eq!(
                    visible,
                    (attempt > 0).then(|| attempt - 1),
                    "a change is visible before its fdatasync returned"
                );
            }
            task.await.expect("apply");
            assert_eq!(store.offset("t", 0), Some(committed(attempt)));
        }
        assert!(observed > 0, "never saw a flush in progress");
    });
}

#[test]
fn delete_fails_applies_waiting_behind_a_flush() {
    run(|| async {
        let (_dir, storage) = scratch_disk().await;
        let mut refused = 0;
        for _ in 0..50 {
            let store = GroupStore::open(&storage, "g").await.expect("open");
            let (first, done) = spawn_commit(&store, 1);
            if !until_flushing(&store, &done).await {
                first.await.expect("apply");
                store.delete().await.expect("delete");
                continue;
            }
            let second = {
                let store = store.clone();
                glommio::spawn_local(async move { store.apply(vec![commit("t", 1, 1)]).await })
            };
            store.delete().await.expect("delete");
            first
                .await
                .expect("the apply being flushed when delete began");
            match second.await {
                Err(EngineError::Closed) => refused += 1,
                Ok(()) => {}
                Err(other) => panic!("unexpected error {other}"),
            }
            assert!(matches!(
                store.apply(vec![commit("t", 2, 1)]).await,
                Err(EngineError::Closed)
            ));
            assert!(GroupStore::list(&storage).await.expect("list").is_empty());
            assert!(GroupStore::open(&storage, "g")
                .await
                .expect("reopen")
                .is_empty());
        }
        assert!(refused > 0, "delete never overtook a waiting apply");
    });
}

#[test]
fn a_colliding_directory_is_refused() {
    run(|| async {
        let storage = Storage::memory();
        storage
            .write_small_durable(
                &GroupStore::log_path("mine"),
                record::encode_header("other", record::FIRST_VERSION),
            )
            .await
            .expect("write");
        assert!(matches!(
            GroupStore::open(&storage, "mine").await,
            Err(EngineError::Corrupt { .. })
        ));
        // Listing skips it: it does not belong in that directory.
        assert!(GroupStore::list(&storage).await.expect("list").is_empty());
    });
}

#[test]
fn an_oversized_apply_is_refused_and_writes_nothing() {
    run(|| async {
        let storage = Storage::memory();
        let store = GroupStore::open(&storage, "g").await.expect("open");
        let len = store.file_len();
        let huge = GroupChange::Metadata(Bytes::from(vec![0u8; record::MAX_RECORD_BODY]));
        assert!(store.apply(vec![huge]).await.is_err());
        assert_eq!(store.file_len(), len);
        assert!(!store.is_poisoned());
        store
            .apply(vec![commit("t", 0, 1)])
            .await
            .expect("later apply");
    });
}

/// Writes a store with a few records, returns its file and where its last record starts.
async fn file_with_records(
    storage: &Storage,
) -> (Vec<u8>, usize, Vec<(String, i32, CommittedOffset)>) {
    let store = GroupStore::open(storage, "g").await.expect("open");
    store
        .apply(vec![commit("a", 0, 1), commit("a", 1, 2)])
        .await
        .expect("apply");
    store
        .apply(vec![GroupChange::Metadata(Bytes::from_static(b"meta"))])
        .await
        .expect("apply");
    let before_last = store.file_len() as usize;
    let kept = store.offsets();
    store
        .apply(vec![commit("a", 0, 3), commit("b", 5, 4)])
        .await
        .expect("apply");
    let bytes = storage
        .read_small(&GroupStore::log_path("g"))
        .await
        .expect("read")
        .expect("file");
    assert_eq!(bytes.len() as u64, store.file_len());
    (bytes, before_last, kept)
}

/// Replaces the file with `bytes`, reopens, and checks that exactly the records before the
/// last one are there (with metadata) and that the store takes and keeps new changes.
async fn reopen_keeps_earlier_records(
    storage: &Storage,
    bytes: Vec<u8>,
    before_last: usize,
    kept: &[(String, i32, CommittedOffset)],
    what: &str,
) {
    storage
        .write_small_durable(&GroupStore::log_path("g"), bytes)
        .await
        .expect("write");
    let store = GroupStore::open(storage, "g")
        .await
        .unwrap_or_else(|e| panic!("{what}: open failed: {e}"));
    assert_eq!(store.offsets(), kept, "{what}");
    assert_eq!(
        store.metadata(),
        Some(Bytes::from_static(b"meta")),
        "{what}"
    );
    assert_eq!(store.file_len() as usize, before_last, "{what}: not cut");
    store
        .apply(vec![commit("z", 0, 9)])
        .await
        .expect("apply after recovery");
    drop(store);
    let again = GroupStore::open(storage, "g").await.expect("reopen");
    assert_eq!(again.offset("z", 0), Some(committed(9)), "{what}");
    assert_eq!(again.offsets().len(), kept.len() + 1, "{what}");
}

#[test]
fn a_torn_or_flipped_last_record_is_cut() {
    run(|| async {
        let storage = Storage::memory();
        let (bytes, before_last, kept) = file_with_records(&storage).await;
        for len in before_last..bytes.len() {
            reopen_keeps_earlier_records(
                &storage,
                bytes[..len].to_vec(),
                before_last,
                &kept,
                &format!("cut at {len}"),
            )
            .await;
        }
        for bit in before_last * 8..bytes.len() * 8 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            reopen_keeps_earlier_records(
                &storage,
                flipped,
                before_last,
                &kept,
                &format!("bit {bit} flipped"),
            )
            .await;
        }
        for garbage in [vec![0u8; 100], vec![0xff; 100], b"KGS1 garbage".to_vec()] {
            let mut extended = bytes[..before_last].to_vec();
            extended.extend_from_slice(&garbage);
            reopen_keeps_earlier_records(&storage, extended, before_last, &kept, "garbage tail")
                .await;
        }
    });
}

#[test]
fn a_torn_tail_is_cut_on_disk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    run(move || async move {
        crate::dma_probe::prepare_executor(&root)
            .await
            .expect("probe");
        let storage = Storage::disk(root.clone());
        let (bytes, before_last, kept) = file_with_records(&storage).await;
        for len in [before_last + 1, before_last + 8, bytes.len() - 1] {
            reopen_keeps_earlier_records(
                &storage,
                bytes[..len].to_vec(),
                before_last,
                &kept,
                &format!("cut at {len}"),
            )
            .await;
            let on_disk = std::fs::metadata(root.join(GroupStore::log_path("g")))
                .expect("stat")
                .len();
            assert!(on_disk > before_last as u64, "the new record is on disk");
        }
    });
}

#[test]
fn an_unreadable_header_fails_the_open() {
    run(|| async {
        let storage = Storage::memory();
        let (mut bytes, _, _) = file_with_records(&storage).await;
        bytes[10] ^= 1;
        storage
            .write_small_durable(&GroupStore::log_path("g"), bytes)
            .await
            .expect("write");
        assert!(matches!(
            GroupStore::open(&storage, "g").await,
            Err(EngineError::Corrupt { .. })
        ));
    });
}

#[test]
fn live_bytes_match_the_encoding() {
    let mut view = View::default();
    let changes = [
        commit("a", 0, 1),
        commit("a", 0, 100_000),
        commit("bb", 3, 1),
        GroupChange::Metadata(Bytes::from_static(b"xyz")),
        GroupChange::DeleteOffset {
            topic: "a".into(),
            partition: 0,
        },
        commit("c", 1, 1),
    ];
    for change in changes {
        view.apply(&Change::Group(change));
        let snapshot = view.snapshot_changes();
        let expected: usize = snapshot.iter().map(record::change_len).sum();
        assert_eq!(view.live_bytes(), expected);
    }
    view.apply(&Change::RemoveTopic("c".into()));
    let expected: usize = view.snapshot_changes().iter().map(record::change_len).sum();
    assert_eq!(view.live_bytes(), expected);
    let transactional = [
        pending(1, 0, "a", 0, 1),
        pending(1, 0, "a", 0, 123_456),
        pending(2, 0, "a", 0, 2),
        pending(2, 0, "bb", 1, 3),
        complete(2, 0, true),
        pending(3, 0, "a", 5, 4),
        GroupChange::DeleteOffset {
            topic: "a".into(),
            partition: 5,
        },
        pending(4, 0, "z", 0, 5),
        complete(1, 0, false),
    ];
    for change in transactional {
        view.apply(&Change::Group(change));
        let expected: usize = view.snapshot_changes().iter().map(record::change_len).sum();
        assert_eq!(view.live_bytes(), expected);
    }
    view.apply(&Change::RemoveTopic("z".into()));
    let expected: usize = view.snapshot_changes().iter().map(record::change_len).sum();
    assert_eq!(view.live_bytes(), expected);
}

#[test]
fn a_flush_cancelled_midway_poisons_the_store() {
    run(|| async {
        let (_dir, storage) = scratch_disk().await;
        let store = GroupStore::open(&storage, "g").await.expect("open");
        store.apply(vec![commit("t", 0, 1)]).await.expect("apply");
        let mut cancelled = false;
        let mut last_acked = 1;
        for _ in 0..50 {
            let (task, done) = spawn_commit(&store, 2);
            if until_flushing(&store, &done).await && !done.get() {
                assert!(task.cancel().await.is_none());
                cancelled = true;
                break;
            }
            task.await.expect("apply");
            last_acked = 2;
        }
        assert!(cancelled, "never caught a flush in progress");
        assert!(store.is_poisoned());
        assert!(
            !store.shared.commit.is_running(),
            "the flush slot was given back"
        );
        assert!(matches!(
            store.apply(vec![commit("t", 0, 3)]).await,
            Err(EngineError::Poisoned(_))
        ));
        assert_eq!(store.offset("t", 0), Some(committed(last_acked)));
    });
}

fn pending(producer_id: i64, epoch: i16, topic: &str, partition: i32, offset: i64) -> GroupChange {
    GroupChange::PendingCommit {
        producer_id,
        producer_epoch: epoch,
        topic: topic.into(),
        partition,
        committed: committed(offset),
    }
}

fn complete(producer_id: i64, epoch: i16, commit: bool) -> GroupChange {
    GroupChange::CompleteTransaction {
        producer_id,
        producer_epoch: epoch,
        commit,
    }
}

/// The format version in the header of `group`'s file.
async fn file_version(storage: &Storage, group: &str) -> u16 {
    let bytes = storage
        .read_small(&GroupStore::log_path(group))
        .await
        .expect("read")
        .expect("file");
    let (body, _) = record::unframe(&bytes).expect("header record");
    record::decode_header(body).expect("header").version
}

#[test]
fn pending_offsets_wait_for_their_transaction_and_survive_reopen() {
    on_both(|storage| async move {
        let store = GroupStore::open(&storage, "g").await.expect("open");
        store
            .apply(vec![commit("t", 0, 5)])
            .await
            .expect("plain commit");
        store
            .apply(vec![pending(7, 1, "t", 0, 10), pending(7, 1, "t", 1, 11)])
            .await
            .expect("pending commit");
        store
            .apply(vec![pending(8, 0, "t", 1, 20)])
            .await
            .expect("another producer");
        // A later pending commit of the same partition by the same producer replaces it.
        store
            .apply(vec![pending(7, 1, "t", 1, 12)])
            .await
            .expect("replacing pending commit");

        assert_eq!(
            store.offset("t", 0),
            Some(committed(5)),
            "not committed yet"
        );
        assert_eq!(store.offset("t", 1), None);
        assert!(store.has_pending_offset("t", 0));
        assert!(store.has_pending_offset("t", 1));
        assert!(!store.has_pending_offset("t", 2));
        assert!(store.has_pending_offsets());
        assert_eq!(store.pending_producers(), vec![(7, 1), (8, 0)]);
        assert_eq!(store.pending_producer_epoch(7), Some(1));
        assert_eq!(store.pending_producer_epoch(9), None);
        let expected_pending = vec![
            ("t".to_owned(), 0, committed(10)),
            ("t".to_owned(), 1, committed(12)),
        ];
        assert_eq!(store.pending_offsets(7), expected_pending);
        assert_eq!(file_version(&storage, "g").await, 2, "upgraded for tag 5");
        drop(store);

        let store = GroupStore::open(&storage, "g").await.expect("reopen");
        assert_eq!(store.pending_offsets(7), expected_pending);
        assert_eq!(
            store.pending_offsets(8),
            vec![("t".to_owned(), 1, committed(20))]
        );
        assert_eq!(store.offsets(), vec![("t".to_owned(), 0, committed(5))]);

        // Producer 8 aborts: its offset goes, producer 7's stays pending.
        store
            .apply(vec![complete(8, 0, false)])
            .await
            .expect("abort");
        assert_eq!(store.pending_offsets(8), Vec::new());
        assert_eq!(store.offset("t", 1), None);
        assert!(
            store.has_pending_offset("t", 1),
            "producer 7's is still there"
        );

        // Producer 7 commits (a marker at a bumped epoch, as transactions v2 write it).
        store
            .apply(vec![complete(7, 2, true)])
            .await
            .expect("commit");
        assert_eq!(
            store.offsets(),
            vec![
                ("t".to_owned(), 0, committed(10)),
                ("t".to_owned(), 1, committed(12)),
            ]
        );
        assert!(!store.has_pending_offsets());
        assert!(!store.has_pending_offset("t", 0));
        assert_eq!(store.pending_producers(), Vec::new());
        // A marker for a producer without pending offsets changes nothing.
        store
            .apply(vec![complete(7, 3, false)])
            .await
            .expect("marker");
        assert_eq!(store.offset("t", 0), Some(committed(10)));
        drop(store);

        let store = GroupStore::open(&storage, "g").await.expect("reopen");
        assert_eq!(store.offset("t", 0), Some(committed(10)));
        assert_eq!(store.offset("t", 1), Some(committed(12)));
        assert!(!store.has_pending_offsets());
    });
}

#[test]
fn a_commit_written_after_the_pending_one_wins() {
    on_both(|storage| async move {
        let store = GroupStore::open(&storage, "g").await.expect("open");
        // Partition 0: the transactional commit is written first, then a plain commit; the
        // transaction's commit must not bring the older offset back (Kafka compares the
        // records' offsets in `__consumer_offsets`).
        store
            .apply(vec![pending(1, 0, "t", 0, 10)])
            .await
            .expect("pending");
        store.apply(vec![commit("t", 0, 30)]).await.expect("plain");
        // Partition 1: two producers; the one written later wins whichever commits first.
        store
            .apply(vec![pending(1, 0, "t", 1, 40)])
            .await
            .expect("pending");
        store
            .apply(vec![pending(2, 0, "t", 1, 50)])
            .await
            .expect("pending");
        // Partition 2: the plain commit comes first, the transactional one replaces it.
        store.apply(vec![commit("t", 2, 60)]).await.expect("plain");
        store
            .apply(vec![pending(1, 0, "t", 2, 70)])
            .await
            .expect("pending");
        drop(store);
        // Replay decides the same way.
        let store = GroupStore::open(&storage, "g").await.expect("reopen");
        store
            .apply(vec![complete(2, 0, true)])
            .await
            .expect("commit 2");
        assert_eq!(store.offset("t", 1), Some(committed(50)));
        store
            .apply(vec![complete(1, 0, true)])
            .await
            .expect("commit 1");
        assert_eq!(
            store.offset("t", 0),
            Some(committed(30)),
            "the plain commit stays"
        );
        assert_eq!(
            store.offset("t", 1),
            Some(committed(50)),
            "producer 2 wrote later"
        );
        assert_eq!(store.offset("t", 2), Some(committed(70)));
    });
}

#[test]
fn a_stale_producer_epoch_is_ignored() {
    run(|| async {
        let storage = Storage::memory();
        let store = GroupStore::open(&storage, "g").await.expect("open");
        store
            .apply(vec![pending(1, 5, "t", 0, 10)])
            .await
            .expect("pending");
        store
            .apply(vec![pending(1, 4, "t", 0, 99)])
            .await
            .expect("stale pending");
        store
            .apply(vec![pending(1, 4, "t", 1, 99)])
            .await
            .expect("stale pending");
        assert_eq!(
            store.pending_offsets(1),
            vec![("t".to_owned(), 0, committed(10))]
        );
        store
            .apply(vec![complete(1, 4, true)])
            .await
            .expect("stale marker");
        assert!(
            store.has_pending_offset("t", 0),
            "a stale marker completes nothing"
        );
        assert_eq!(store.offset("t", 0), None);
        // A newer epoch's pending commit joins the same producer's, at the new epoch.
        store
            .apply(vec![pending(1, 6, "t", 1, 11)])
            .await
            .expect("newer pending");
        assert_eq!(store.pending_producers(), vec![(1, 6)]);
        store
            .apply(vec![complete(1, 5, true)])
            .await
            .expect("stale marker");
        assert!(store.has_pending_offsets());
        store
            .apply(vec![complete(1, 6, true)])
            .await
            .expect("marker");
        assert_eq!(
            store.offsets(),
            vec![
                ("t".to_owned(), 0, committed(10)),
                ("t".to_owned(), 1, committed(11)),
            ]
        );
    });
}

#[test]
fn deleted_offsets_and_topics_take_pending_offsets_with_them() {
    on_both(|storage| async move {
        let store = GroupStore::open(&storage, "g").await.expect("open");
        store
            .apply(vec![
                pending(1, 0, "a", 0, 1),
                pending(1, 0, "a", 1, 2),
                pending(2, 0, "a", 0, 3),
                pending(2, 0, "b", 0, 4),
                commit("a", 0, 5),
            ])
            .await
            .expect("apply");
        store
            .apply(vec![GroupChange::DeleteOffset {
                topic: "a".into(),
                partition: 0,
            }])
            .await
            .expect("delete");
        assert_eq!(store.offset("a", 0), None);
        assert!(!store.has_pending_offset("a", 0));
        assert_eq!(
            store.pending_offsets(1),
            vec![("a".to_owned(), 1, committed(2))]
        );
        assert_eq!(
            store.pending_offsets(2),
            vec![("b".to_owned(), 0, committed(4))]
        );
        store.remove_topic("b").await.expect("remove topic");
        assert_eq!(
            store.pending_producers(),
            vec![(1, 0)],
            "producer 2 has none left"
        );
        assert!(!store.is_empty());
        store.remove_topic("a").await.expect("remove topic");
        assert!(store.is_empty());
        store
            .apply(vec![complete(1, 0, true)])
            .await
            .expect("marker");
        assert!(store.is_empty(), "nothing was left to commit");
        drop(store);
        assert!(GroupStore::open(&storage, "g")
            .await
            .expect("reopen")
            .is_empty());
    });
}

/// A file as the store wrote it before transactional offsets: header version 1, then a
/// change record with a commit (the bytes of that format, built by hand).
fn version_one_file() -> Vec<u8> {
    let header: Vec<u8> = [&[1u8][..], b"KGS1", &[0, 1], &[0, 0, 0, 1, b'g']].concat();
    let changes: Vec<u8> = [
        &[2u8, 0, 0, 0, 1][..],
        &[1, 0, 0, 0, 1, b't'],
        &[0, 0, 0, 0],
        &[0, 0, 0, 0, 0, 0, 0, 5],
        &[0, 0, 0, 3],
        &[0, 0, 0, 2, b'm', b'5'],
        &[0, 0, 0, 0, 0, 0, 0x03, 0xed],
    ]
    .concat();
    [record::frame(&header), record::frame(&changes)].concat()
}

#[test]
fn a_version_one_file_is_read_and_rewritten_before_a_transactional_record() {
    on_both(|storage| async move {
        let path = GroupStore::log_path("g");
        storage
            .create_dir_all(path.parent().expect("a directory"))
            .await
            .expect("mkdir");
        storage
            .write_small_durable(&path, version_one_file())
            .await
            .expect("write");
        let store = GroupStore::open(&storage, "g").await.expect("open");
        assert_eq!(store.offset("t", 0), Some(committed(5)));
        store
            .apply(vec![commit("t", 1, 6)])
            .await
            .expect("plain commit");
        assert_eq!(
            file_version(&storage, "g").await,
            1,
            "plain commits keep version 1"
        );
        let compactions = store.compaction_count();
        store
            .apply(vec![pending(3, 0, "t", 0, 7)])
            .await
            .expect("pending commit");
        assert_eq!(file_version(&storage, "g").await, 2);
        assert_eq!(store.compaction_count(), compactions + 1, "rewritten once");
        store
            .apply(vec![pending(3, 0, "t", 1, 8)])
            .await
            .expect("pending commit");
        assert_eq!(store.compaction_count(), compactions + 1, "and only once");
        drop(store);
        let store = GroupStore::open(&storage, "g").await.expect("reopen");
        assert_eq!(store.offset("t", 0), Some(committed(5)));
        assert_eq!(store.offset("t", 1), Some(committed(6)));
        assert_eq!(store.pending_offsets(3).len(), 2);

        // A new group's file starts at version 1.
        GroupStore::open(&storage, "fresh").await.expect("open");
        assert_eq!(file_version(&storage, "fresh").await, 1);
    });
}

#[test]
fn a_transactional_record_in_a_version_one_file_is_cut() {
    run(|| async {
        let storage = Storage::memory();
        let mut bytes = version_one_file();
        let valid = bytes.len();
        let body = record::encode_changes(&[Change::Group(pending(1, 0, "t", 0, 9))]);
        bytes.extend_from_slice(&record::frame(&body));
        storage
            .write_small_durable(&GroupStore::log_path("g"), bytes)
            .await
            .expect("write");
        let store = GroupStore::open(&storage, "g").await.expect("open");
        assert_eq!(store.file_len() as usize, valid);
        assert!(!store.has_pending_offsets());
        assert_eq!(store.offset("t", 0), Some(committed(5)));
    });
}

#[test]
fn pending_offsets_survive_compaction() {
    on_both(|storage| async move {
        let store = GroupStore::open(&storage, "g").await.expect("open");
        let big = "x".repeat(4_000);
        let with_big = |change: GroupChange| match change {
            GroupChange::PendingCommit {
                producer_id,
                producer_epoch,
                topic,
                partition,
                committed,
            } => GroupChange::PendingCommit {
                producer_id,
                producer_epoch,
                topic,
                partition,
                committed: CommittedOffset {
                    metadata: big.clone(),
                    ..committed
                },
            },
            other => other,
        };
        // An overtaken pending offset (a plain commit written after it) and a live one.
        store
            .apply(vec![pending(9, 0, "t", 0, 1)])
            .await
            .expect("pending");
        store.apply(vec![commit("t", 0, 2)]).await.expect("plain");
        store.apply(vec![commit("t", 1, 3)]).await.expect("plain");
        store
            .apply(vec![pending(9, 0, "t", 1, 4)])
            .await
            .expect("pending");
        for i in 0..600 {
            store
                .apply(vec![with_big(pending(100 + i % 4, 0, "u", 0, i))])
                .await
                .expect("apply");
        }
        assert!(store.compaction_count() >= 1, "the test never compacted");
        let pending_before: Vec<_> = store
            .pending_producers()
            .into_iter()
            .map(|(producer, _)| store.pending_offsets(producer))
            .collect();
        drop(store);
        let store = GroupStore::open(&storage, "g").await.expect("reopen");
        let pending_after: Vec<_> = store
            .pending_producers()
            .into_iter()
            .map(|(producer, _)| store.pending_offsets(producer))
            .collect();
        assert_eq!(pending_after, pending_before);
        store
            .apply(vec![complete(9, 0, true)])
            .await
            .expect("commit");
        assert_eq!(store.offset("t", 0), Some(committed(2)), "still overtaken");
        assert_eq!(store.offset("t", 1), Some(committed(4)));
    });
}

#[test]
fn a_snapshot_replays_to_the_same_decisions() {
    let changes = [
        pending(1, 0, "t", 0, 10),
        commit("t", 0, 30),
        pending(1, 0, "t", 1, 40),
        pending(2, 3, "t", 1, 50),
        commit("t", 2, 60),
        pending(2, 3, "t", 2, 70),
        pending(1, 0, "t", 3, 80),
        complete(2, 4, true),
        pending(3, 0, "t", 1, 90),
        commit("t", 1, 100),
    ];
    let mut view = View::default();
    for change in changes {
        view.apply(&Change::Group(change));
    }
    let mut replayed = View::default();
    for change in view.snapshot_changes() {
        replayed.apply(&change);
    }
    assert_eq!(replayed.offsets(), view.offsets());
    assert_eq!(replayed.pending_producers(), view.pending_producers());
    for completion in [complete(1, 0, true), complete(3, 0, true)] {
        view.apply(&Change::Group(completion.clone()));
        replayed.apply(&Change::Group(completion));
        assert_eq!(replayed.offsets(), view.offsets());
    }
    assert_eq!(view.offset("t", 0), Some(committed(30)));
    assert_eq!(view.offset("t", 1), Some(committed(100)));
    assert_eq!(view.offset("t", 3), Some(committed(80)));
}
