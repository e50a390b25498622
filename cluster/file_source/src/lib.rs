//! `assignment.json` on the shared volume: written atomically ([`write_assignment`]), read
//! with every torn, oversized or inconsistent file refused ([`read_assignment`]), and followed
//! by a thread that watches the file and delivers each assignment `apply_if_new` accepts
//! ([`FileFollower`]); and the highest controller epoch used on the volume
//! ([`controller_epoch_file`]), which only rises.
//!
//! The decisions (is this file good, is it new) are `kaas-cluster`'s; this crate only moves
//! bytes between the disk and those decisions. It uses no async runtime: the follower is one
//! plain thread waiting in `poll(2)` on an inotify descriptor and an eventfd.

mod assignment_reader;
mod assignment_writer;
mod cluster_id_file;
pub mod controller_epoch_file;
mod file_follower;
mod file_watch;

pub use assignment_reader::{read_assignment, ReadError, MAX_ASSIGNMENT_BYTES};
pub use assignment_writer::{write_assignment, write_assignment_if};
pub use cluster_id_file::{load_or_create_cluster_id, CLUSTER_ID_FILE};
pub use controller_epoch_file::{
    read_recorded_epoch, record_epoch, EpochFileError, CONTROLLER_EPOCH_FILE,
};
pub use file_follower::{AssignmentSink, FileFollower, FollowerNudger, FollowerOptions};

/// The file's name inside `<data>/__cluster/`.
pub use kaas_volume::ASSIGNMENT_FILE;
