//! Periodic work on a shard for as long as its owner lives.
//!
//! A shard's services (the log manager's maintenance, a coordinator's ticks, the expiry of
//! idle producers) each run one pass every interval on their own executor. The task holds
//! only a [`Weak`] between passes, so it never keeps its owner alive: once the owner is
//! dropped, the next wake-up finds nothing to upgrade and the task ends.

use std::future::Future;
use std::rc::{Rc, Weak};
use std::time::Duration;

/// Sleeps `interval`, then runs `pass` on the owner, again and again until `owner` no
/// longer upgrades (checked after each sleep). The owner is held only while a pass runs.
/// The task runs on the current executor; its handle may be kept or dropped.
pub fn spawn_every<T, Pass, Done>(
    owner: Weak<T>,
    interval: Duration,
    mut pass: Pass,
) -> glommio::task::JoinHandle<()>
where
    T: 'static,
    Pass: FnMut(Rc<T>) -> Done + 'static,
    Done: Future<Output = ()>,
{
    glommio::spawn_local(async move {
        loop {
            glommio::timer::sleep(interval).await;
            let Some(owner) = owner.upgrade() else {
                return;
            };
            pass(owner).await;
        }
    })
    .detach()
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;
    use std::time::Duration;

    use super::spawn_every;

    #[test]
    fn runs_every_interval_and_ends_with_its_owner() {
        glommio::LocalExecutorBuilder::default()
            .make()
            .expect("executor")
            .run(async {
                let owner = Rc::new(Cell::new(0u32));
                let handle = spawn_every(
                    Rc::downgrade(&owner),
                    Duration::from_millis(5),
                    |owner: Rc<Cell<u32>>| async move { owner.set(owner.get() + 1) },
                );
                while owner.get() < 3 {
                    glommio::timer::sleep(Duration::from_millis(5)).await;
                }
                drop(owner);
                // The task ends at its next wake-up, once nothing upgrades.
                assert_eq!(handle.await, Some(()));
            });
    }
}
