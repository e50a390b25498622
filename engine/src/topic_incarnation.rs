//! Cluster mode: a partition's directory names its topic's id, and a deleted topic's
//! directory is removed.
//!
//! # Layout
//!
//! ```text
//! topics/<topic>@<topic id>/<partition>/     cluster mode (this module)
//! topics/<topic>/<partition>/                standalone (PartitionId::dir, unchanged)
//! topics/<topic>@<topic id>-delete/          a deleted topic's directory while it is removed
//! ```
//!
//! `<topic id>` is Kafka's text form of the id (22 characters of URL-safe base64). `@` is in
//! neither alphabet (topic names are `[A-Za-z0-9._-]`), so a name maps to one topic and back.
//!
//! # Why the id is in the name
//!
//! Kafka gives a topic created again under a deleted one's name a new id, and it starts empty.
//! Under `topics/<topic>/` the new topic's leader would open the old files: recovery reads
//! whatever the directory holds. Worse, the storage fence cannot keep the two apart. A
//! stale leader of the old topic (paused, view lagging) finds its files and its token
//! (`claims/<epoch>.live`, `crate::fence`) by path; if the new topic's leader claims the same
//! fence epoch in a directory of the same path (a new topic starts again at leader epoch 0),
//! the stale leader's token check passes and its new segments get the same `-e<epoch>` names
//! the new leader writes. With the id in the name, every path a leader of the old topic can
//! reach is outside the new topic's directory, whatever epochs either uses.
//!
//! # Removing a deleted topic ([`remove_deleted_topic`])
//!
//! A broker that applies an assignment in which a topic id it saw before is gone (deleted, or
//! replaced under its name by a new id) first closes every partition of it on its own shards
//! (the takeover's close phase), then (kaas-net waits 2 s, so that the other leaders have
//! closed theirs too: a close after the rename fails, harmlessly) renames `topics/<topic>@<id>` to
//! `topics/<topic>@<id>-delete`, fsyncs `topics/`, removes the renamed tree and fsyncs
//! `topics/` again. Every broker that follows the assignment does this; the rename is atomic,
//! so exactly one of them moves the directory, and the removal tolerates files already gone.
//! The rename is what fences a leader that is still writing (its view lags, or it was paused):
//!
//! - its token check after each fdatasync opens `…@<id>/<p>/claims/<epoch>.live` by path, which
//!   no longer exists: the flush fails `Fenced` and nothing written after the rename is
//!   acknowledged (a write to a deleted topic may or may not have been kept, as in Kafka);
//! - its new files (a roll, a checkpoint, a snapshot) are created by path under the old name,
//!   which no longer exists, so they fail; data it writes through descriptors it already holds
//!   goes to files in the renamed tree, which nobody reads and which is being removed;
//! - no new topic can ever open a path under `…@<id>`: ids are unique, never reused.
//!
//! A leader that re-creates the directory by path in the instant between the rename and its
//! own close (a `create_dir_all` of a roll) leaves a stray `…@<id>` tree that nobody reads;
//! the next broker to apply a deletion of that id would remove it, but none will (the id is
//! gone for good): it leaks, harmlessly. A crash during the removal leaves `…@<id>-delete`,
//! which no topic reads either; [`remove_deleted_topic`] finishes it when called again.
//! A broker that was down while a topic was deleted does not see the deletion (it never saw
//! the id go); another broker that applied it removed the files.

use std::path::{Path, PathBuf};

use crate::error::{EngineError, Result};
use crate::log_manager::is_legal_topic_name;
use crate::storage::Storage;

/// The directory all topics live in, relative to the storage root.
use kaas_volume::TOPICS_DIR;
const SEPARATOR: char = '@';
const DELETE_SUFFIX: &str = "-delete";

/// Whether `id` looks like Kafka's text form of a topic id (URL-safe base64, no padding).
fn is_legal_topic_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 24
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `topics/<topic>@<topic id>`, refusing names that could escape the storage root.
pub fn topic_dir(topic: &str, topic_id: &str) -> Result<PathBuf> {
    if !is_legal_topic_name(topic) || !is_legal_topic_id(topic_id) {
        return Err(EngineError::Corrupt {
            what: "topic directory".into(),
            detail: format!("illegal topic {topic:?} or topic id {topic_id:?}"),
        });
    }
    Ok(Path::new(TOPICS_DIR).join(format!("{topic}{SEPARATOR}{topic_id}")))
}

/// `topics/<topic>@<topic id>/<partition>`: where cluster mode keeps a partition's files.
pub fn partition_dir(topic: &str, topic_id: &str, partition: i32) -> Result<PathBuf> {
    if partition < 0 {
        return Err(EngineError::Corrupt {
            what: "partition directory".into(),
            detail: format!("illegal partition {partition} of {topic}"),
        });
    }
    Ok(topic_dir(topic, topic_id)?.join(partition.to_string()))
}

/// Removes the deleted topic `topic` with id `topic_id` from the volume (see the module doc
/// for why this is safe while a stale leader still writes). Call it only once this broker
/// has closed every partition of that topic. Returns whether this call moved the directory
/// (false: another broker did, or there was none).
pub async fn remove_deleted_topic(storage: &Storage, topic: &str, topic_id: &str) -> Result<bool> {
    let live = topic_dir(topic, topic_id)?;
    let mut doomed = live.clone().into_os_string();
    doomed.push(DELETE_SUFFIX);
    let doomed = PathBuf::from(doomed);
    // What a crash (or another broker) left of an earlier removal goes first, so the rename
    // below never meets a non-empty directory.
    storage.remove_dir_all(&doomed).await?;
    let moved = storage.rename(&live, &doomed).await?;
    if moved {
        storage.sync_dir(Path::new(TOPICS_DIR)).await?;
    }
    storage.remove_dir_all(&doomed).await?;
    storage.sync_dir(Path::new(TOPICS_DIR)).await?;
    Ok(moved)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]

    use super::*;

    const ID: &str = "ASNFZ4mrze_-3LqYdlQyEA";

    #[test]
    fn names_carry_the_id_and_never_escape() {
        assert_eq!(
            partition_dir("orders", ID, 3).expect("legal"),
            Path::new("topics/orders@ASNFZ4mrze_-3LqYdlQyEA/3")
        );
        assert!(topic_dir("..", ID).is_err());
        assert!(topic_dir("a/b", ID).is_err());
        assert!(topic_dir("orders", "../x").is_err());
        assert!(topic_dir("orders", "").is_err());
        assert!(topic_dir("orders", "a@b").is_err());
        assert!(partition_dir("orders", ID, -1).is_err());
    }

    #[test]
    fn a_deleted_topic_goes_and_a_second_removal_finds_nothing() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().to_path_buf();
        let files = root.join("topics/orders@ASNFZ4mrze_-3LqYdlQyEA/0/claims");
        std::fs::create_dir_all(&files).expect("dirs");
        std::fs::write(files.join("00000000000000000001"), b"").expect("claim");
        // A crashed earlier removal of the same topic, and another topic that stays.
        std::fs::create_dir_all(root.join("topics/orders@ASNFZ4mrze_-3LqYdlQyEA-delete/1"))
            .expect("leftover");
        std::fs::create_dir_all(root.join("topics/orders@_u3MqYdlQyEBI0VniavN7w/0"))
            .expect("other");
        let storage_root = root.clone();
        let (first, second) = glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let storage = Storage::disk(storage_root);
                let first = remove_deleted_topic(&storage, "orders", ID)
                    .await
                    .expect("remove");
                let second = remove_deleted_topic(&storage, "orders", ID)
                    .await
                    .expect("remove again");
                (first, second)
            })
            .expect("executor")
            .join()
            .expect("join");
        assert!(first && !second);
        let left: Vec<String> = std::fs::read_dir(root.join("topics"))
            .expect("topics")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, vec!["orders@_u3MqYdlQyEBI0VniavN7w".to_string()]);
    }
}
