//! The follower thread: watches `<cluster_dir>/assignment.json`, offers every changed file to
//! `kaas-cluster`'s `apply_if_new`, and delivers each accepted assignment to a sink (a
//! channel). It wakes on inotify notification, on [`FileFollower::nudge`] (the controller's
//! "assignment changed" push) and every poll interval (1 s by default), and re-reads the file
//! only when its identity (device, inode, size, mtime, ctime) changed or it was nudged, so a
//! refused file is logged once, not every second.
//!
//! The follower's own state (the epoch fence, the current assignment) lives on this thread;
//! consumers only ever see accepted assignments, in the order they were accepted. Other
//! threads raise the epoch fence through [`FollowerNudger::observe_epoch`] (the controller
//! epoch the Lease shows, or the one an `ASSIGNMENT_CHANGED` push carries): it is kept in an
//! atomic the thread folds into its fence before every file it offers, so a file read after
//! `observe_epoch` returned is judged against it.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use kaas_cluster::assignment::Assignment;
use kaas_cluster::follower::AssignmentFollower;
use kaas_cluster::ids::ControllerEpoch;

use crate::assignment_reader::{read_assignment, ReadError};
use crate::file_watch::{wait, DirWatch, Waker};
use crate::ASSIGNMENT_FILE;

/// Where accepted assignments go.
pub trait AssignmentSink: Send + 'static {
    /// Hands over an accepted assignment; `false` when nobody listens any more (the follower
    /// then stops).
    fn deliver(&mut self, assignment: Arc<Assignment>) -> bool;
}

/// A futures channel: its receiver works on glommio, tokio or a plain thread alike.
impl AssignmentSink for futures_channel::mpsc::UnboundedSender<Arc<Assignment>> {
    fn deliver(&mut self, assignment: Arc<Assignment>) -> bool {
        self.unbounded_send(assignment).is_ok()
    }
}

impl AssignmentSink for std::sync::mpsc::Sender<Arc<Assignment>> {
    fn deliver(&mut self, assignment: Arc<Assignment>) -> bool {
        self.send(assignment).is_ok()
    }
}

/// How the follower watches.
#[derive(Clone, Copy, Debug)]
pub struct FollowerOptions {
    /// The longest the follower goes without looking at the file.
    pub poll_interval: Duration,
    /// Whether to use inotify as well (off: polling alone).
    pub notify: bool,
}

impl Default for FollowerOptions {
    fn default() -> Self {
        FollowerOptions {
            poll_interval: Duration::from_secs(1),
            notify: true,
        }
    }
}

/// A running follower thread; dropping it stops the thread and waits for it.
#[derive(Debug)]
pub struct FileFollower {
    waker: Arc<Waker>,
    /// The highest controller epoch learnt from outside the file (0: none).
    observed_epoch: Arc<AtomicU64>,
    stopping: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FileFollower {
    /// Starts following `<cluster_dir>/assignment.json` with a fresh follower state. The
    /// directory need not exist yet.
    pub fn spawn(
        cluster_dir: &Path,
        options: FollowerOptions,
        sink: impl AssignmentSink,
    ) -> io::Result<Self> {
        let waker = Arc::new(Waker::new()?);
        let observed_epoch = Arc::new(AtomicU64::new(0));
        let stopping = Arc::new(AtomicBool::new(false));
        let run = FollowLoop {
            dir: cluster_dir.to_path_buf(),
            options,
            waker: waker.clone(),
            observed_epoch: observed_epoch.clone(),
            stopping: stopping.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("kaas-assignment".into())
            .spawn(move || run.run(sink))?;
        Ok(FileFollower {
            waker,
            observed_epoch,
            stopping,
            thread: Some(thread),
        })
    }

    /// Makes the follower re-read the file now.
    pub fn nudge(&self) {
        self.waker.wake();
    }

    /// Raises the epoch fence, like [`FollowerNudger::observe_epoch`].
    pub fn observe_epoch(&self, epoch: ControllerEpoch) {
        self.nudger().observe_epoch(epoch);
    }

    /// A handle that nudges this follower, and raises its epoch fence, from any thread (the
    /// heartbeat client's `ASSIGNMENT_CHANGED` callback, the Lease adapter); nudging a
    /// stopped follower does nothing.
    pub fn nudger(&self) -> FollowerNudger {
        FollowerNudger {
            waker: self.waker.clone(),
            observed_epoch: self.observed_epoch.clone(),
        }
    }

    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        self.stopping.store(true, Ordering::Release);
        self.waker.wake();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for FileFollower {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// Makes a [`FileFollower`] re-read the file now, like [`FileFollower::nudge`], and raises
/// its epoch fence; cheap to clone, `Send` and `Sync`, and it does not keep the follower
/// thread alive.
#[derive(Clone, Debug)]
pub struct FollowerNudger {
    waker: Arc<Waker>,
    observed_epoch: Arc<AtomicU64>,
}

impl FollowerNudger {
    /// Wakes the follower.
    pub fn nudge(&self) {
        self.waker.wake();
    }

    /// A controller of `epoch` exists (the Lease shows it, or its push carried it): from now
    /// on the follower refuses files of lower epochs (`AssignmentFollower::observe_epoch`),
    /// including any it reads after this returns. Never lowers the fence.
    pub fn observe_epoch(&self, epoch: ControllerEpoch) {
        self.observed_epoch.fetch_max(epoch.0, Ordering::SeqCst);
    }
}

/// What identifies one version of the file on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileIdentity {
    device: u64,
    inode: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

fn identity(path: &Path) -> Option<FileIdentity> {
    let meta = std::fs::metadata(path).ok()?;
    Some(FileIdentity {
        device: meta.dev(),
        inode: meta.ino(),
        size: meta.size(),
        mtime: (meta.mtime(), meta.mtime_nsec()),
        ctime: (meta.ctime(), meta.ctime_nsec()),
    })
}

struct FollowLoop {
    dir: PathBuf,
    options: FollowerOptions,
    waker: Arc<Waker>,
    observed_epoch: Arc<AtomicU64>,
    stopping: Arc<AtomicBool>,
}

impl FollowLoop {
    fn run(self, mut sink: impl AssignmentSink) {
        let path = self.dir.join(ASSIGNMENT_FILE);
        let mut watch = DirWatch::new(&self.dir, self.options.notify);
        let mut follower = AssignmentFollower::new();
        let mut last_seen: Option<Option<FileIdentity>> = None;
        let mut nudged = true;
        while !self.stopping.load(Ordering::Acquire) {
            watch.ensure();
            let now = identity(&path);
            if nudged || last_seen != Some(now) {
                last_seen = Some(now);
                if !self.offer(&path, &mut follower, &mut sink) {
                    return;
                }
            }
            nudged = false;
            match wait(&mut watch, &self.waker, self.options.poll_interval) {
                Ok(wake) => nudged = wake.woken,
                Err(error) => {
                    tracing::warn!(%error, "waiting for assignment.json changes failed");
                    std::thread::sleep(self.options.poll_interval);
                }
            }
        }
    }

    /// Reads the file and offers it; `false` when the sink is gone. The epoch learnt from
    /// outside is folded into the fence after the read, so a file written after
    /// [`FollowerNudger::observe_epoch`] returned is judged against that epoch.
    fn offer(
        &self,
        path: &Path,
        follower: &mut AssignmentFollower,
        sink: &mut impl AssignmentSink,
    ) -> bool {
        let read = read_assignment(path);
        let observed = self.observed_epoch.load(Ordering::SeqCst);
        if observed > 0 && follower.highest_epoch() < Some(ControllerEpoch(observed)) {
            tracing::info!(
                epoch = observed,
                "a newer controller epoch is known: files of older ones are refused"
            );
            follower.observe_epoch(ControllerEpoch(observed));
        }
        match read {
            Ok(assignment) => {
                let (epoch, version) = (assignment.controller_epoch(), assignment.version());
                match follower.apply_if_new(assignment) {
                    Ok(applied) => {
                        tracing::info!(?epoch, ?version, "applying assignment");
                        return sink.deliver(applied);
                    }
                    Err(rejection) => {
                        tracing::info!(%rejection, "assignment.json not applied");
                    }
                }
            }
            Err(ReadError::Missing) => tracing::debug!("no assignment.json yet"),
            Err(error) => {
                tracing::warn!(%error, "assignment.json refused; keeping the last good assignment");
            }
        }
        true
    }
}
