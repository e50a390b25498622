mod common;
use common::*;
use kaas_engine::{LogConfig, PartitionLog, Storage};
use std::path::PathBuf;
fn main() {
    run_on_executor("dbg", || async {
        let root = PathBuf::from("/tmp/exp/dbgroot");
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        kaas_engine::dma_probe::prepare_executor(&root).await.unwrap();
        let storage = Storage::disk(root.clone());
        let dir = PathBuf::from("t/0");
        let log = PartitionLog::open(&storage, &dir, LogConfig::default()).await.unwrap();
        let batch = exact_batch(MIB, 1000);
        for i in 0..512 { if i % 16 == 15 { log.flush().await.unwrap(); } log.append(&batch, 0, now_ms()).await.unwrap(); }
        log.flush().await.unwrap();
        println!("before checkpoint {:?}", log.offsets());
        log.checkpoint().await.unwrap();
        for _ in 0..16 { log.append(&batch, 0, now_ms()).await.unwrap(); }
        log.flush().await.unwrap();
        println!("end {:?}", log.offsets());
        drop(log);
        for _ in 0..3 {
            let t = std::time::Instant::now();
            let log = PartitionLog::open(&storage, &dir, LogConfig::default()).await.unwrap();
            println!("open {:?} {:?}", t.elapsed(), log.offsets());
            drop(log);
        }
    });
}
