//! Whether a group has a store on the data volume, without creating one.
//!
//! In cluster mode a coordinator starts with no group loaded and a group moves between
//! brokers by its store alone, so a request for a group that is not loaded here must tell a
//! group that exists on the volume (committed offsets, a classic group's membership) from
//! one that does not, as Kafka's coordinator does once it has loaded its
//! `__consumer_offsets` partition. Opening the store to find out would create it.

use std::path::Path;

use kaas_engine::group_store::{dir_name, log_file_name, GROUPS_DIR};
use kaas_engine::{Result, Storage};

/// Whether `group_id`'s directory holds an offsets file of any fence epoch (`offsets.log`,
/// `offsets-e<epoch>.log`). A deleted group's directory keeps only its claims: not stored.
pub async fn has_store(storage: &Storage, group_id: &str) -> Result<bool> {
    let dir = Path::new(GROUPS_DIR).join(dir_name(group_id));
    Ok(storage
        .list_dir(&dir)
        .await?
        .iter()
        .any(|name| is_offsets_file(name)))
}

/// Whether `name` is the engine's name of an offsets file at some fence epoch.
fn is_offsets_file(name: &str) -> bool {
    if name == log_file_name(0) {
        return true;
    }
    name.strip_prefix("offsets-e")
        .and_then(|rest| rest.strip_suffix(".log"))
        .and_then(|digits| digits.parse::<u32>().ok())
        .is_some_and(|epoch| epoch > 0 && log_file_name(epoch) == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_files_of_every_epoch_and_nothing_else() {
        assert!(is_offsets_file("offsets.log"));
        assert!(is_offsets_file("offsets-e7.log"));
        assert!(!is_offsets_file("offsets-e07.log"));
        assert!(!is_offsets_file("offsets-e0.log"));
        assert!(!is_offsets_file("offsets-e7.log.tmp"));
        assert!(!is_offsets_file("claims"));
    }

    #[test]
    fn a_store_exists_once_opened_and_not_after_delete() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let storage = Storage::memory();
                assert!(!has_store(&storage, "g").await.expect("list"));
                let store = kaas_engine::GroupStore::open_at_epoch(&storage, "g", 3)
                    .await
                    .expect("open");
                assert!(has_store(&storage, "g").await.expect("list"));
                assert!(!has_store(&storage, "other").await.expect("list"));
                store.delete().await.expect("delete");
                assert!(!has_store(&storage, "g").await.expect("list"));
            })
            .expect("executor")
            .join()
            .expect("joined");
    }
}
