//! Writing and reading `assignment.json` on a real directory: a write replaces the file whole
//! and leaves no temporary file; a read refuses a missing, torn, oversized or inconsistent file
//! and returns exactly what was written otherwise.

use std::fs;

use kaas_cluster::assignment::{Assignment, AssignmentError};
use kaas_cluster_file::{
    read_assignment, write_assignment, ReadError, ASSIGNMENT_FILE, MAX_ASSIGNMENT_BYTES,
};

fn assignment(epoch: u64, version: u64) -> Assignment {
    let text = format!(
        r#"{{"format": 1, "controller_epoch": {epoch}, "assignment_version": {version},
        "brokers": [{{"id": 0, "host": "127.0.0.1", "port": 19092}}],
        "topics": {{"orders": {{"id": "ASNFZ4mrze_-3LqYdlQyEA", "partitions": 1}}}},
        "partitions": {{"orders": [{{"leader": 0, "leader_epoch": {epoch}}}]}}}}"#
    );
    Assignment::from_json(text.as_bytes()).expect("valid")
}

#[test]
fn a_write_replaces_the_file_whole_and_leaves_nothing_else() {
    let dir = tempfile::tempdir().expect("temp dir");
    let first = assignment(1, 1);
    write_assignment(dir.path(), &first).expect("write");
    let second = assignment(2, 5);
    write_assignment(dir.path(), &second).expect("write");
    let path = dir.path().join(ASSIGNMENT_FILE);
    assert_eq!(read_assignment(&path).expect("read"), second);
    let names: Vec<String> = fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec![ASSIGNMENT_FILE.to_string()]);
}

#[test]
fn a_write_into_a_missing_directory_fails_and_leaves_no_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = kaas_volume::cluster_dir(dir.path());
    assert!(write_assignment(&missing, &assignment(1, 1)).is_err());
    assert!(!missing.exists());
}

#[test]
fn bad_files_are_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join(ASSIGNMENT_FILE);
    assert!(matches!(read_assignment(&path), Err(ReadError::Missing)));

    let bytes = assignment(1, 1).to_json();
    fs::write(&path, &bytes[..bytes.len() / 2]).expect("write torn file");
    assert!(matches!(
        read_assignment(&path),
        Err(ReadError::Refused(AssignmentError::Truncated(_)))
    ));

    let inconsistent = String::from_utf8(bytes.clone())
        .expect("utf-8")
        .replace("\"leader\": 0", "\"leader\": 4");
    fs::write(&path, inconsistent).expect("write");
    assert!(matches!(
        read_assignment(&path),
        Err(ReadError::Refused(AssignmentError::UnknownLeader {
            leader: 4,
            ..
        }))
    ));

    // Oversized: sparse, so the test writes almost nothing.
    let file = fs::File::create(&path).expect("create");
    file.set_len(MAX_ASSIGNMENT_BYTES + 1).expect("extend");
    assert!(matches!(read_assignment(&path), Err(ReadError::TooLarge)));

    fs::remove_file(&path).expect("remove");
    fs::create_dir(&path).expect("a directory where the file should be");
    assert!(matches!(read_assignment(&path), Err(ReadError::Io(_))));
}
