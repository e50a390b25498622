//! Start-up work-around for glommio 0.9's polled-I/O probe.
//!
//! glommio decides whether a device supports polled (IOPOLL) I/O by reading the first DMA
//! file an executor opens. When that file is new and empty the probe wrongly answers yes,
//! and every later direct read on the device fails with `EOPNOTSUPP`. So each executor,
//! before it creates any segment, opens an existing non-empty file on the data device: the
//! probe file `<data>/__cluster/dma-probe` (4 KiB of a fixed pattern, created once with
//! ordinary buffered I/O and fsync'd).

use std::path::{Path, PathBuf};

use glommio::io::OpenOptions;

use crate::error::{EngineError, Result};

const PROBE_LEN: usize = 4096;

fn probe_path(root: &Path) -> PathBuf {
    kaas_volume::cluster_dir(root).join(kaas_volume::DMA_PROBE_FILE)
}

/// Makes direct reads work on the executor it is called from. Call once per executor, before
/// opening any partition on `root`. Harmless for in-memory storage (do not call it then).
pub async fn prepare_executor(root: &Path) -> Result<()> {
    let path = probe_path(root);
    let create_path = path.clone();
    glommio::executor()
        .spawn_blocking(move || create_probe_file(&create_path))
        .await
        .map_err(|e| EngineError::io("creating the direct-I/O probe file", e))?;
    let file = OpenOptions::new()
        .read(true)
        .dma_open(&path)
        .await
        .map_err(|e| EngineError::io("opening the direct-I/O probe file", e))?;
    let read = file.read_at_aligned(0, PROBE_LEN).await;
    let _ = file.close().await;
    match read {
        Ok(bytes) if bytes.len() == PROBE_LEN => Ok(()),
        Ok(bytes) => Err(EngineError::Corrupt {
            what: path.display().to_string(),
            detail: format!("probe read returned {} bytes", bytes.len()),
        }),
        Err(e) => Err(EngineError::io("reading the direct-I/O probe file", e)),
    }
}

fn create_probe_file(path: &Path) -> std::io::Result<()> {
    if std::fs::metadata(path).is_ok_and(|m| m.len() >= PROBE_LEN as u64) {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    // Executors start concurrently, also in several brokers sharing the directory (cluster
    // mode): each writes its own temporary file (process and thread in its name), and
    // whichever rename lands last leaves an identical probe file.
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(
        format!(
            ".{}.{:?}.tmp",
            std::process::id(),
            std::thread::current().id()
        )
        .replace(['(', ')'], ""),
    );
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, vec![0x6bu8; PROBE_LEN])?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(parent) = path.parent() {
        std::fs::File::open(parent)?.sync_all()?;
    }
    Ok(())
}
