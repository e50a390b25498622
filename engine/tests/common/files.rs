//! Damaging a log's files behind its back, as a crash or a bad disk would.

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

/// Cuts or extends the file at `path` to `len` bytes.
pub fn set_len(path: &Path, len: u64) {
    OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open")
        .set_len(len)
        .expect("set_len");
}

/// Overwrites the file at `path` with `bytes` from `position`.
pub fn write_at(path: &Path, position: u64, bytes: &[u8]) {
    let mut file = OpenOptions::new().write(true).open(path).expect("open");
    file.seek(SeekFrom::Start(position)).expect("seek");
    file.write_all(bytes).expect("write");
}
