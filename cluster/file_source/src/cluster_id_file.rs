//! `<data>/__cluster/cluster-id`: the cluster id every broker of the cluster reports (Metadata
//! `cluster_id`), created once by whichever broker starts first.
//!
//! Format: the id alone, Kafka's 22-character base64url form of 16 random bytes, no newline.
//! Creation writes a temporary file of this process, `fsync`s it, then `link(2)`s it to
//! `cluster-id`: `link` fails if the name exists, so of several brokers starting at once
//! exactly one creates the file and the others read that one, and a reader never sees a
//! partly written id. A crash leaves at most a stray `cluster-id.tmp.<pid>` behind.

use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;

use kaas_cluster::ids::TopicId;

/// The file's name inside `<data>/__cluster/`.
pub use kaas_volume::CLUSTER_ID_FILE;

/// The cluster id in `cluster_dir`, created (with the directory) if there is none yet.
pub fn load_or_create_cluster_id(cluster_dir: &Path) -> io::Result<String> {
    fs::create_dir_all(cluster_dir)?;
    let path = cluster_dir.join(CLUSTER_ID_FILE);
    if let Some(id) = read_id(&path)? {
        return Ok(id);
    }
    let tmp = cluster_dir.join(format!("{CLUSTER_ID_FILE}.tmp.{}", std::process::id()));
    let id = kaas_cluster::ids::cluster_id_of(random_bytes()?);
    {
        let mut file = fs::File::create(&tmp)?;
        file.write_all(id.as_bytes())?;
        file.sync_all()?;
    }
    let linked = fs::hard_link(&tmp, &path);
    let _ = fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            fs::File::open(cluster_dir)?.sync_all()?;
            Ok(id)
        }
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => read_id(&path)?
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "cluster-id vanished")),
        Err(error) => Err(error),
    }
}

fn read_id(path: &Path) -> io::Result<Option<String>> {
    let mut text = String::new();
    match fs::File::open(path) {
        Ok(file) => {
            file.take(64).read_to_string(&mut text)?;
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    }
    let id = text.trim();
    if TopicId::parse(id).is_err() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} does not hold a cluster id", path.display()),
        ));
    }
    Ok(Some(id.to_string()))
}

fn random_bytes() -> io::Result<[u8; 16]> {
    let mut bytes = [0u8; 16];
    fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_broker_creates_the_id_and_the_others_read_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let cluster = kaas_volume::cluster_dir(dir.path());
        let first = load_or_create_cluster_id(&cluster).expect("created");
        assert_eq!(first.len(), 22);
        assert_eq!(load_or_create_cluster_id(&cluster).expect("read"), first);
        fs::write(cluster.join(CLUSTER_ID_FILE), b"not an id").expect("overwrite");
        assert!(load_or_create_cluster_id(&cluster).is_err());
    }
}
