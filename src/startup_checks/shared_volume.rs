//! Cluster mode: is the data directory really shared between the brokers?
//!
//! Every broker leaves a marker `<data>/__cluster/brokers/<id>` (one line: broker id, host
//! name and start time in ms, written to a temporary name and renamed). What is checkable at
//! start is the past: a broker named by `assignment.json` has been alive while the controller
//! wrote it, so it has written its marker on the volume the assignment is on. If the
//! assignment is older than [`GRACE`] (by its mtime; younger ones may name brokers still
//! starting, as when an operator writes the file before starting the brokers) and a broker it
//! names has no marker here, this broker is looking at a different volume from that broker:
//! a per-pod volume (ReadWriteOnce, emptyDir, a hostPath on another node) where a
//! ReadWriteMany one was meant, or a network file system whose negative lookup cache hides
//! files other clients create (which would also hide the partition fence's claim tokens).
//! A fresh private volume with no assignment at all cannot be told from a fresh cluster: such
//! a broker waits for an assignment and never turns ready (`/readyz`).

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kaas_cluster::ids::BrokerId;

use super::{ExitCode, Refusal};

/// How old an assignment must be before the brokers it names must have left markers.
const GRACE: Duration = Duration::from_secs(30);

pub fn check(data_dir: &Path, broker_id: i32) -> Result<(), Refusal> {
    let cluster_dir = kaas_volume::cluster_dir(data_dir);
    let markers = cluster_dir.join(kaas_volume::BROKER_MARKERS_DIR);
    if let Err(error) = write_marker(&markers, broker_id) {
        // The broker's own start-up reports an unwritable volume with the path and error.
        tracing::warn!(%error, "could not write this broker's marker on the shared volume");
        return Ok(());
    }
    let assignment_path = cluster_dir.join("assignment.json");
    let Ok(metadata) = std::fs::metadata(&assignment_path) else {
        return Ok(());
    };
    let age = metadata
        .modified()
        .ok()
        .and_then(|written| SystemTime::now().duration_since(written).ok())
        .unwrap_or_default();
    if age < GRACE {
        return Ok(());
    }
    // An unreadable or invalid assignment is the follower's to report.
    let Ok(assignment) = kaas_cluster_file::read_assignment(&assignment_path) else {
        return Ok(());
    };
    let missing: Vec<String> = assignment
        .brokers()
        .keys()
        .filter(|id| **id != BrokerId(broker_id))
        .filter(|id| !markers.join(id.0.to_string()).exists())
        .map(|id| id.0.to_string())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Refusal::new(
        ExitCode::VolumeNotShared,
        format!(
            "kaas cannot start: the data directory {} does not look shared with the other \
             brokers. Its assignment ({} s old) names broker(s) {} that never left a marker in \
             {} as every broker does at start. Cause: each broker has its own volume (a \
             ReadWriteOnce or per-pod volume, emptyDir, or hostPath where one ReadWriteMany \
             volume was meant), or the shared file system caches lookups so that files other \
             brokers create stay invisible (NFS lookupcache), which would also hide the \
             partition fence. Fix: mount one ReadWriteMany volume with POSIX locking and no \
             negative lookup caching (NFS: lookupcache=none) on every broker at --data-dir.",
            data_dir.display(),
            age.as_secs(),
            missing.join(", "),
            markers.display()
        ),
    ))
}

fn write_marker(markers: &Path, broker_id: i32) -> std::io::Result<()> {
    std::fs::create_dir_all(markers)?;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let started_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let tmp = markers.join(format!(".{broker_id}.tmp-{}", std::process::id()));
    std::fs::write(&tmp, format!("{broker_id} {} {started_ms}\n", host.trim()))?;
    std::fs::rename(&tmp, markers.join(broker_id.to_string()))
}
