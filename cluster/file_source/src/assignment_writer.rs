//! Writing `assignment.json` so that no reader, and no crash, ever sees half of it.
//!
//! Order: serialise the whole assignment; create a new temporary file in the same directory
//! (`assignment.json.tmp-<pid>-<n>`, created exclusively so two writers never share one);
//! write it all; `fsync` it; rename it over `assignment.json`; `fsync` the directory so the
//! rename itself is durable. A crash before the rename leaves the old file in place (and a
//! temporary file readers never open); after it, the new file. The rename is atomic on a local
//! file system and on CephFS; on NFS it is atomic on the server, and readers must not cache
//! the directory entry (see the crate README).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use kaas_cluster::assignment::Assignment;

use crate::ASSIGNMENT_FILE;

/// Distinguishes the temporary files of one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Replaces `<cluster_dir>/assignment.json` with `assignment`, durably and atomically.
pub fn write_assignment(cluster_dir: &Path, assignment: &Assignment) -> io::Result<()> {
    write_assignment_if(cluster_dir, assignment, || true).map(|_| ())
}

/// Like [`write_assignment`], but asks `still_allowed` right before the rename (after the
/// slow part, the write and `fsync` of the temporary file) and drops the write when it says
/// no: the controller checks its renew deadline there, so a controller paused mid-write
/// does not rename a file after its Lease may have passed to another. Returns whether the
/// file was renamed into place.
pub fn write_assignment_if(
    cluster_dir: &Path,
    assignment: &Assignment,
    still_allowed: impl FnOnce() -> bool,
) -> io::Result<bool> {
    let bytes = assignment.to_json();
    let temp = temp_path(cluster_dir);
    let written = write_synced(&temp, &bytes).and_then(|()| {
        if !still_allowed() {
            return Ok(false);
        }
        fs::rename(&temp, cluster_dir.join(ASSIGNMENT_FILE))?;
        File::open(cluster_dir)?.sync_all()?;
        Ok(true)
    });
    if !matches!(written, Ok(true)) {
        // Best effort: a leftover temporary file is harmless, only untidy.
        let _ = fs::remove_file(&temp);
    }
    written
}

fn temp_path(cluster_dir: &Path) -> PathBuf {
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    cluster_dir.join(format!("{ASSIGNMENT_FILE}.tmp-{}-{n}", std::process::id()))
}

fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new().write(true).create_new(true).open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}
