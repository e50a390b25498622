//! Deleting a partition while it is being opened (recovered) never races the open: the
//! delete waits for the recovery, closes the log, and no open can start while the files are
//! removed. (glommio panics when a file's directory vanishes in the middle of opening it.)

mod common;

use std::rc::Rc;

use kaas_engine::batch::encode_batch_for_tests;
use kaas_engine::{EngineError, LogConfig, LogManager, PartitionId};

#[test]
fn deletes_and_opens_of_the_same_partitions_interleave_safely() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    common::run(move || async move {
        let storage = common::disk_storage(&root).await;
        let manager = Rc::new(LogManager::new(storage));
        let batch = encode_batch_for_tests(&[(Some(b"k"), Some(b"v"))], 1, -1, 0, -1);
        for round in 0..20 {
            let id = PartitionId::new("racy", round);
            let log = manager.open(&id, LogConfig::default()).await.expect("open");
            log.append_durable(&batch, 0, 1).await.expect("append");
            manager.close(&id).await.expect("close");
            // A reopen (recovery) and a delete start together; then another open.
            let opening = {
                let (manager, id) = (manager.clone(), id.clone());
                glommio::spawn_local(async move { manager.open(&id, LogConfig::default()).await })
            };
            let deleting = {
                let (manager, id) = (manager.clone(), id.clone());
                glommio::spawn_local(async move { manager.delete(&id).await })
            };
            let late = {
                let (manager, id) = (manager.clone(), id.clone());
                glommio::spawn_local(async move { manager.open(&id, LogConfig::default()).await })
            };
            assert!(
                opening.await.is_ok(),
                "the first open completes before the delete"
            );
            let late = late.await;
            deleting.await.expect("delete");
            match late {
                // Refused while the files were removed; or it joined the first open and holds
                // the log the delete then closed; or it opened a fresh, empty log afterwards.
                Err(EngineError::Closed) => {}
                Ok(log) => match log.read(0, 1).await {
                    Err(EngineError::Closed) => {}
                    _ => assert_eq!(log.offsets().log_end_offset, 0, "deleted data is gone"),
                },
                Err(other) => panic!("unexpected {other}"),
            }
            let _ = manager.delete(&id).await;
        }
    });
}
