//! Shard 0's own services: producer id allocation, the fenced closes its takeover driver
//! has not seen yet, and the broker's [`FenceReports`]. They live in a slot of their own on shard 0's thread
//! ([`install_on_this_shard`], [`on_this_shard`]), not in every shard's context: other shards
//! reach them by a hop to shard 0 (`Router::call`), which runs there.

use std::cell::RefCell;
use std::rc::Rc;

use crate::shard::fence_reports::FenceReports;
use crate::shard::producer_ids::ProducerIdAllocator;
use crate::shard::shard_commands::FencedClose;

/// What only shard 0 has.
pub struct ShardZero {
    /// Producer id allocation.
    pub producer_ids: ProducerIdAllocator,
    /// Partitions some shard closed because the storage fence found a newer claim, not yet
    /// seen by the takeover driver (see [`crate::shard::shard_commands::forget_fenced`]).
    fenced_closes: RefCell<Vec<FencedClose>>,
    /// The partitions this broker is fenced from, for its heartbeat (a standalone broker's
    /// are read by nobody).
    fence_reports: RefCell<FenceReports>,
}

impl ShardZero {
    /// Shard 0's services, allocating producer ids with `producer_ids`.
    pub fn new(producer_ids: ProducerIdAllocator) -> Self {
        ShardZero {
            producer_ids,
            fenced_closes: RefCell::new(Vec::new()),
            fence_reports: RefCell::new(FenceReports::new()),
        }
    }

    /// Records a fenced close for the driver's next plan, and reports the partition fenced
    /// at once (the claim is above the epoch it was open at).
    pub fn report_fenced_close(&self, closed: FencedClose) {
        self.fence_reports
            .borrow()
            .record(closed.partition.clone(), closed.leader_epoch);
        self.fenced_closes.borrow_mut().push(closed);
    }

    /// Reports fenced partitions to `reports` from now on (the broker's, which the cluster
    /// core reads for its pings).
    pub fn report_fences_to(&self, reports: FenceReports) {
        *self.fence_reports.borrow_mut() = reports;
    }

    /// Where fenced partitions are reported.
    pub fn fence_reports(&self) -> FenceReports {
        self.fence_reports.borrow().clone()
    }

    /// Takes the fenced closes reported since the last call.
    pub fn take_fenced_closes(&self) -> Vec<FencedClose> {
        std::mem::take(&mut *self.fenced_closes.borrow_mut())
    }
}

thread_local! {
    /// Shard 0's services, on shard 0's thread.
    static ON_THIS_SHARD: RefCell<Option<Rc<ShardZero>>> = const { RefCell::new(None) };
}

/// Makes `services` shard 0's, on the thread running shard 0 (at start; `None` at shut-down).
pub fn install_on_this_shard(services: Option<ShardZero>) {
    ON_THIS_SHARD.with(|slot| *slot.borrow_mut() = services.map(Rc::new));
}

/// Shard 0's services, when called on shard 0's thread.
pub fn on_this_shard() -> Option<Rc<ShardZero>> {
    ON_THIS_SHARD.with(|slot| slot.borrow().clone())
}
