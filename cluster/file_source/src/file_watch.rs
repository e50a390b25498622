//! The operating-system side of following a file without an async runtime: an inotify watch
//! on the directory (the fast path), an eventfd that other threads use to wake the follower,
//! and one `poll(2)` on both with the poll interval as its timeout (the backstop, and the only
//! path where inotify is missing or blind, as on NFS for changes made by other machines).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Events that can mean `assignment.json` changed: a file renamed into the directory or
/// written and closed, or the directory itself going away.
const WATCHED: u32 = libc::IN_MOVED_TO
    | libc::IN_CLOSE_WRITE
    | libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF;

/// The fixed part of `struct inotify_event` (wd, mask, cookie, len).
const EVENT_HEADER: usize = 16;

/// A wake-up other threads can send (an eventfd).
#[derive(Debug)]
pub(crate) struct Waker {
    fd: OwnedFd,
}

impl Waker {
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: eventfd takes no pointers; a non-negative result is a new descriptor we own.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by eventfd and nothing else owns it.
        Ok(Waker {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Wakes the thread waiting in [`wait`].
    pub(crate) fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd. A failure can only be a full
        // counter, which still leaves the waiter woken.
        unsafe {
            libc::write(
                self.fd.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
    }

    fn drain(&self) {
        let mut count: u64 = 0;
        // SAFETY: reads at most 8 bytes into a live u64; non-blocking, so it returns at once.
        unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                (&mut count as *mut u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
    }
}

/// An inotify watch on one directory, re-established when the directory comes back.
#[derive(Debug)]
pub(crate) struct DirWatch {
    dir: PathBuf,
    inotify: Option<OwnedFd>,
    watching: bool,
}

impl DirWatch {
    /// A watch on `dir`, or a watch that never fires if `enabled` is false or inotify is not
    /// available (the poll then does all the work).
    pub(crate) fn new(dir: &Path, enabled: bool) -> Self {
        let inotify = if enabled {
            // SAFETY: inotify_init1 takes no pointers; a non-negative result is ours.
            let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
            if fd < 0 {
                tracing::warn!(
                    error = %io::Error::last_os_error(),
                    "no inotify: following assignment.json by polling alone"
                );
                None
            } else {
                // SAFETY: `fd` was just returned by inotify_init1 and nothing else owns it.
                Some(unsafe { OwnedFd::from_raw_fd(fd) })
            }
        } else {
            None
        };
        let mut watch = DirWatch {
            dir: dir.to_path_buf(),
            inotify,
            watching: false,
        };
        watch.ensure();
        watch
    }

    /// Adds the watch if it is not in place (the directory may not exist yet).
    pub(crate) fn ensure(&mut self) {
        let Some(inotify) = &self.inotify else { return };
        if self.watching {
            return;
        }
        let Ok(path) = CString::new(self.dir.as_os_str().as_bytes()) else {
            return;
        };
        // SAFETY: `path` is a live NUL-terminated string and `inotify` our descriptor.
        let wd = unsafe { libc::inotify_add_watch(inotify.as_raw_fd(), path.as_ptr(), WATCHED) };
        self.watching = wd >= 0;
    }

    /// Reads every pending event; notes when the watch was removed (the directory went away).
    fn drain(&mut self) {
        let Some(inotify) = &self.inotify else { return };
        let mut buffer = [0u8; 4096];
        loop {
            // SAFETY: reads at most `buffer.len()` bytes into the live buffer.
            let read = unsafe {
                libc::read(
                    inotify.as_raw_fd(),
                    buffer.as_mut_ptr().cast(),
                    buffer.len(),
                )
            };
            let Ok(read) = usize::try_from(read) else {
                return;
            };
            if read == 0 {
                return;
            }
            let mut at = 0;
            while at + EVENT_HEADER <= read {
                let field = |offset: usize| {
                    let mut bytes = [0u8; 4];
                    bytes.copy_from_slice(&buffer[at + offset..at + offset + 4]);
                    u32::from_ne_bytes(bytes)
                };
                let mask = field(4);
                let name_len = field(12) as usize;
                if mask & libc::IN_IGNORED != 0 {
                    self.watching = false;
                }
                at += EVENT_HEADER + name_len;
            }
        }
    }
}

/// Why [`wait`] returned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Wake {
    /// The directory changed.
    pub(crate) notified: bool,
    /// Another thread called [`Waker::wake`].
    pub(crate) woken: bool,
}

/// Waits until the directory changes, the waker fires or `timeout` passes.
pub(crate) fn wait(watch: &mut DirWatch, waker: &Waker, timeout: Duration) -> io::Result<Wake> {
    let mut fds = [
        libc::pollfd {
            fd: waker.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: watch.inotify.as_ref().map_or(-1, AsRawFd::as_raw_fd),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let millis = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: `fds` is a live array of two pollfds; a negative fd is ignored by poll.
    let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, millis) };
    if ready < 0 {
        let error = io::Error::last_os_error();
        if error.kind() == io::ErrorKind::Interrupted {
            return Ok(Wake::default());
        }
        return Err(error);
    }
    let wake = Wake {
        woken: fds[0].revents & libc::POLLIN != 0,
        notified: fds[1].revents & libc::POLLIN != 0,
    };
    if wake.woken {
        waker.drain();
    }
    if wake.notified {
        watch.drain();
    }
    Ok(wake)
}
