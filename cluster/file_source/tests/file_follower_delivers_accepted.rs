//! The follower thread on a real directory: it delivers each assignment `apply_if_new`
//! accepts, in order, and nothing else (not a stale controller's file, a replay, or a torn
//! or inconsistent one), by notification and by polling alone, and it stops when dropped.

use std::fs;
use std::path::Path;
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kaas_cluster::assignment::Assignment;
use kaas_cluster::ids::{AssignmentVersion, ControllerEpoch};
use kaas_cluster_file::{write_assignment, FileFollower, FollowerOptions, ASSIGNMENT_FILE};

fn assignment(epoch: u64, version: u64) -> Assignment {
    let text = format!(
        r#"{{"format": 1, "controller_epoch": {epoch}, "assignment_version": {version},
        "brokers": [{{"id": 0, "host": "127.0.0.1", "port": 19092}}],
        "topics": {{"orders": {{"id": "ASNFZ4mrze_-3LqYdlQyEA", "partitions": 1}}}},
        "partitions": {{"orders": [{{"leader": 0, "leader_epoch": 0}}]}}}}"#
    );
    Assignment::from_json(text.as_bytes()).expect("valid")
}

/// Generous: a loaded 2-core machine can delay a thread by seconds.
const PATIENCE: Duration = Duration::from_secs(10);

fn next(receiver: &Receiver<Arc<Assignment>>) -> (ControllerEpoch, AssignmentVersion) {
    let got = receiver
        .recv_timeout(PATIENCE)
        .expect("an assignment arrives");
    (got.controller_epoch(), got.version())
}

/// Gives the follower time to see (and refuse) whatever is on disk now: a nudge makes it
/// re-read, and a good file written after it must be the next thing delivered.
fn settle() {
    std::thread::sleep(Duration::from_millis(300));
}

fn run(dir: &Path, options: FollowerOptions) {
    let (sender, receiver) = channel();
    let follower = FileFollower::spawn(dir, options, sender).expect("spawn");
    let path = dir.join(ASSIGNMENT_FILE);

    write_assignment(dir, &assignment(3, 17)).expect("write");
    assert_eq!(next(&receiver), (ControllerEpoch(3), AssignmentVersion(17)));

    // A deposed controller's file, a replay, a torn file and an inconsistent one: none is
    // delivered.
    write_assignment(dir, &assignment(2, 30)).expect("write");
    settle();
    write_assignment(dir, &assignment(3, 17)).expect("write");
    follower.nudge();
    settle();
    let good = assignment(3, 40).to_json();
    fs::write(&path, &good[..good.len() / 3]).expect("torn write");
    settle();
    let bad = String::from_utf8(good.clone())
        .expect("utf-8")
        .replace("\"leader\": 0", "\"leader\": 9");
    fs::write(&path, bad).expect("inconsistent write");
    settle();
    assert!(receiver.try_recv().is_err(), "a refused file was delivered");

    write_assignment(dir, &assignment(4, 18)).expect("write");
    assert_eq!(next(&receiver), (ControllerEpoch(4), AssignmentVersion(18)));

    let started = Instant::now();
    drop(follower);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "stopping took too long"
    );
    assert!(
        receiver.recv_timeout(Duration::from_millis(100)).is_err(),
        "the sender is dropped with the thread"
    );
}

#[test]
fn notified_follower_delivers_only_accepted_assignments() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A long poll interval: only notification (or a nudge) can deliver in time.
    run(
        dir.path(),
        FollowerOptions {
            poll_interval: Duration::from_secs(60),
            notify: true,
        },
    );
}

#[test]
fn polling_follower_delivers_only_accepted_assignments() {
    let dir = tempfile::tempdir().expect("temp dir");
    run(
        dir.path(),
        FollowerOptions {
            poll_interval: Duration::from_millis(50),
            notify: false,
        },
    );
}

#[test]
fn a_follower_started_before_the_directory_exists_picks_it_up() {
    let parent = tempfile::tempdir().expect("temp dir");
    let dir = kaas_volume::cluster_dir(parent.path());
    let (sender, receiver) = channel();
    let _follower = FileFollower::spawn(
        &dir,
        FollowerOptions {
            poll_interval: Duration::from_millis(100),
            notify: true,
        },
        sender,
    )
    .expect("spawn");
    settle();
    fs::create_dir(&dir).expect("create");
    write_assignment(&dir, &assignment(1, 1)).expect("write");
    assert_eq!(next(&receiver), (ControllerEpoch(1), AssignmentVersion(1)));
}

#[test]
fn an_epoch_learnt_from_outside_refuses_a_stale_controllers_later_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (sender, receiver) = channel();
    let follower = FileFollower::spawn(
        dir.path(),
        FollowerOptions {
            poll_interval: Duration::from_millis(50),
            notify: true,
        },
        sender,
    )
    .expect("spawn");
    write_assignment(dir.path(), &assignment(3, 17)).expect("write");
    assert_eq!(next(&receiver), (ControllerEpoch(3), AssignmentVersion(17)));
    // The Lease (or a push) shows a controller of epoch 4; the deposed controller of epoch 3
    // writes once more before the new one writes anything.
    let nudger = follower.nudger();
    nudger.observe_epoch(ControllerEpoch(4));
    nudger.observe_epoch(ControllerEpoch(2));
    write_assignment(dir.path(), &assignment(3, 18)).expect("write");
    nudger.nudge();
    settle();
    assert!(
        receiver.try_recv().is_err(),
        "the stale controller's file was applied"
    );
    // The new controller's first file, at the version the stale one used.
    write_assignment(dir.path(), &assignment(4, 18)).expect("write");
    assert_eq!(next(&receiver), (ControllerEpoch(4), AssignmentVersion(18)));
}
