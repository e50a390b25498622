//! Reading `assignment.json`: the whole file, at most [`MAX_ASSIGNMENT_BYTES`], parsed and
//! checked by `kaas-cluster`. A torn, oversized, malformed or inconsistent file is an error the
//! caller logs while it keeps its last good assignment.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use kaas_cluster::assignment::{Assignment, AssignmentError};

/// The largest file read: far above any real cluster's (10,000 partitions take about 1 MiB
/// pretty-printed), and small enough that a garbage file cannot exhaust memory.
pub const MAX_ASSIGNMENT_BYTES: u64 = 64 << 20;

/// Why no assignment came out of the file.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// There is no file (yet).
    #[error("no assignment file yet")]
    Missing,
    /// The file could not be read.
    #[error("reading the assignment file failed: {0}")]
    Io(#[from] io::Error),
    /// The file is larger than [`MAX_ASSIGNMENT_BYTES`].
    #[error("the assignment file is larger than {MAX_ASSIGNMENT_BYTES} bytes")]
    TooLarge,
    /// The file was read but refused.
    #[error(transparent)]
    Refused(#[from] AssignmentError),
}

/// Reads and checks the assignment at `path`.
pub fn read_assignment(path: &Path) -> Result<Assignment, ReadError> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Err(ReadError::Missing),
        Err(error) => return Err(ReadError::Io(error)),
    };
    let mut bytes = Vec::new();
    // Read one byte past the cap so that an oversized file is noticed, whatever its metadata
    // claims.
    file.take(MAX_ASSIGNMENT_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_ASSIGNMENT_BYTES {
        return Err(ReadError::TooLarge);
    }
    Ok(Assignment::from_json(&bytes)?)
}
