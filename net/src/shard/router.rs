//! Hops between shards: run a closure on another shard and get its result back.
//!
//! Each shard has an inbox (a multi-producer channel usable from any thread); a job is a
//! `Send` closure that receives the target shard and returns a local future. One hop carries
//! all of one request's work for that shard, because a hop costs tens of microseconds of
//! wake-up.
//!
//! The reply wakes the calling task from the target shard's thread. A task that calls
//! [`Router::call`] must not be awaited through its glommio `JoinHandle`: glommio 0.9 can
//! free such a task twice (see `connection.rs`); spawn it detached and send its result
//! through a channel.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use futures_channel::oneshot;

use crate::shard::Shard;

/// A unit of work sent to a shard.
pub type ShardJob = Box<dyn FnOnce(Rc<Shard>) -> Pin<Box<dyn Future<Output = ()>>> + Send>;

/// Inboxes of every shard, by shard index.
pub struct Router {
    inboxes: Vec<async_channel::Sender<ShardJob>>,
}

/// The receiving end of one shard's inbox.
pub type Inbox = async_channel::Receiver<ShardJob>;

impl Router {
    /// A router over `shards` shards and the inbox of each.
    pub fn new(shards: usize) -> (Self, Vec<Inbox>) {
        let (senders, receivers) = (0..shards).map(|_| async_channel::unbounded()).unzip();
        (Router { inboxes: senders }, receivers)
    }

    /// Number of shards.
    pub fn shards(&self) -> usize {
        self.inboxes.len()
    }

    /// Runs `job` on shard `target` (inline when it is `from`) and returns its result;
    /// `None` if the target shard has stopped.
    pub async fn call<R, F, Fut>(&self, from: &Rc<Shard>, target: usize, job: F) -> Option<R>
    where
        F: FnOnce(Rc<Shard>) -> Fut + Send + 'static,
        Fut: Future<Output = R> + 'static,
        R: Send + 'static,
    {
        if target == from.index {
            return Some(job(from.clone()).await);
        }
        let inbox = self.inboxes.get(target)?;
        let (reply, result) = oneshot::channel();
        let boxed: ShardJob = Box::new(move |shard| {
            Box::pin(async move {
                let _ = reply.send(job(shard).await);
            })
        });
        inbox.send(boxed).await.ok()?;
        result.await.ok()
    }

    /// Runs `job` on every shard concurrently; results in shard order (`None` for a stopped
    /// shard).
    pub async fn broadcast<R, F, Fut>(&self, from: &Rc<Shard>, job: F) -> Vec<Option<R>>
    where
        F: Fn(Rc<Shard>) -> Fut + Send + Sync + Clone + 'static,
        Fut: Future<Output = R> + 'static,
        R: Send + 'static,
    {
        let calls = (0..self.shards()).map(|target| {
            let job = job.clone();
            self.call(from, target, job)
        });
        futures_util::future::join_all(calls).await
    }

    /// Stops every shard's inbox (shut-down).
    pub fn close(&self) {
        for inbox in &self.inboxes {
            inbox.close();
        }
    }
}
