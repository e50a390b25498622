//! A bounded pool of threads for the file-system calls a shard cannot make on its ring.
//!
//! Directory listings, small-file reads and writes, hard links, removals and directory
//! fsyncs ([`crate::storage::Storage`]) are blocking system calls. glommio runs such work on
//! a blocking pool of **one thread per executor**, so every one of them on a shard waits for
//! all the others: opening 1,000 partitions at a new fence epoch (a dozen such calls each,
//! most of them fsyncs) took seconds, one call after another. This pool has
//! [`FILE_THREADS`] threads shared by every shard of the process, so that a shard opening many
//! partitions at once keeps that many calls in flight, and the disk can overlap their fsyncs.
//!
//! Threads: the workers are plain OS threads started on first use (not pinned; they mostly
//! wait for the disk). A caller awaits a `futures_channel::oneshot` reply, which wakes its
//! glommio task from the worker thread. A job that panics is answered with an error and the
//! worker carries on. If no worker thread can be started, jobs run on glommio's blocking
//! pool instead, as before.

use std::panic::AssertUnwindSafe;
use std::sync::{mpsc, Arc, Mutex, OnceLock};

use futures_channel::oneshot;

/// Worker threads in the process. A takeover's calls are mostly fsyncs, and on ext4 the
/// fsyncs in flight together share one journal commit: with 16 threads, 1,000 partitions'
/// ~20,000 fsyncs waited in a queue for 16 at a time; 64 let a shard's 64 opens in flight
/// each keep one running. They use no CPU while they wait.
pub const FILE_THREADS: usize = 64;

type Job = Box<dyn FnOnce() + Send>;

/// The queue the workers take jobs from; `None` when no worker could be started.
fn queue() -> &'static Option<mpsc::Sender<Job>> {
    static QUEUE: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();
    QUEUE.get_or_init(|| {
        let (sender, receiver) = mpsc::channel::<Job>();
        let receiver = Arc::new(Mutex::new(receiver));
        let mut started = 0;
        for index in 0..FILE_THREADS {
            let receiver = receiver.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("kaas-files-{index}"))
                .spawn(move || work(&receiver));
            match spawned {
                Ok(_) => started += 1,
                Err(error) => tracing::warn!(%error, "starting a file thread"),
            }
        }
        (started > 0).then_some(sender)
    })
}

fn work(receiver: &Mutex<mpsc::Receiver<Job>>) {
    loop {
        let job = {
            // A worker that panicked while holding the lock held no job yet: nothing to
            // repair, so poisoning is ignored.
            let receiver = receiver
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            receiver.recv()
        };
        match job {
            Ok(job) => job(),
            Err(_) => return,
        }
    }
}

/// Runs `f` on a file thread and returns its result; a panic in `f` becomes an error.
pub async fn run<R: Send + 'static>(
    f: impl FnOnce() -> std::io::Result<R> + Send + 'static,
) -> std::io::Result<R> {
    let Some(sender) = queue() else {
        return glommio::executor().spawn_blocking(f).await;
    };
    let (reply, answer) = oneshot::channel();
    let job: Job = Box::new(move || {
        let result = std::panic::catch_unwind(AssertUnwindSafe(f))
            .unwrap_or_else(|_| Err(std::io::Error::other("a file operation panicked")));
        let _ = reply.send(result);
    });
    if sender.send(job).is_err() {
        return Err(std::io::Error::other("the file threads stopped"));
    }
    answer
        .await
        .unwrap_or_else(|_| Err(std::io::Error::other("the file threads stopped")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on_executor<T: Send + 'static>(
        f: impl FnOnce() -> std::pin::Pin<Box<dyn std::future::Future<Output = T>>> + Send + 'static,
    ) -> T {
        glommio::LocalExecutorBuilder::default()
            .spawn(f)
            .expect("executor")
            .join()
            .expect("join")
    }

    #[test]
    fn jobs_run_concurrently_and_panics_become_errors() {
        let (all_met, panicked) = on_executor(|| {
            Box::pin(async {
                // Each job waits until every one of them has started: only possible when
                // all run at once (a generous bound keeps a failure from hanging).
                let arrived = Arc::new(std::sync::atomic::AtomicUsize::new(0));
                let jobs = (0..FILE_THREADS).map(|_| {
                    let arrived = arrived.clone();
                    run(move || {
                        use std::sync::atomic::Ordering;
                        arrived.fetch_add(1, Ordering::SeqCst);
                        let deadline =
                            std::time::Instant::now() + std::time::Duration::from_secs(20);
                        while arrived.load(Ordering::SeqCst) < FILE_THREADS {
                            if std::time::Instant::now() > deadline {
                                return Ok(false);
                            }
                            std::thread::sleep(std::time::Duration::from_millis(1));
                        }
                        Ok(true)
                    })
                });
                let mut all_met = true;
                for result in join_all(jobs.collect()).await {
                    all_met &= result.expect("job");
                }
                let panicked = run(|| -> std::io::Result<()> { panic!("boom") }).await;
                (all_met, panicked)
            })
        });
        assert!(all_met, "the jobs did not all run at once");
        assert!(panicked.is_err());
    }

    /// Awaits every future (the engine has no futures-util).
    async fn join_all<F>(futures: Vec<F>) -> Vec<F::Output>
    where
        F: std::future::Future + 'static,
        F::Output: 'static,
    {
        let tasks: Vec<_> = futures
            .into_iter()
            .map(|f| glommio::spawn_local(f))
            .collect();
        let mut out = Vec::new();
        for task in tasks {
            out.push(task.await);
        }
        out
    }
}
