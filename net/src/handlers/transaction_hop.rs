//! Running transaction work on the coordinator of a transactional id: the shard leading the
//! id's `__transaction_state` partition ([`crate::transactions::partition_for`]).

use std::future::Future;
use std::rc::Rc;

use crate::model::cluster_view::Leadership;
use crate::protocol::ErrorCode;
use crate::shard::transaction_coordinators::Driver;
use crate::shard::Shard;
use crate::transactions::{partition_for, TRANSACTION_STATE_TOPIC};

/// Runs `job` with the coordinator of `transactional_id`, on its shard. NOT_COORDINATOR when
/// this broker does not lead the id's partition (or `__transaction_state` does not exist
/// yet), COORDINATOR_LOAD_IN_PROGRESS while the coordinator loads, COORDINATOR_NOT_AVAILABLE
/// when its shard has stopped: each makes the client ask FindCoordinator again, or retry.
pub async fn on_coordinator<R, F, Fut>(
    shard: &Rc<Shard>,
    transactional_id: &str,
    job: F,
) -> Result<R, ErrorCode>
where
    F: FnOnce(Rc<Driver>) -> Fut + Send + 'static,
    Fut: Future<Output = R> + 'static,
    R: Send + 'static,
{
    let partition = partition_for(transactional_id);
    let view = shard.view.load();
    let Leadership::Here { .. } = view.leadership(TRANSACTION_STATE_TOPIC, partition) else {
        return Err(ErrorCode::NotCoordinator);
    };
    let target = view.owner_shard(TRANSACTION_STATE_TOPIC, partition);
    drop(view);
    shard
        .router
        .call(shard, target, move |target| async move {
            match target.transactions.get(partition) {
                Ok(driver) => Ok(job(driver).await),
                Err(error) => Err(error),
            }
        })
        .await
        .ok_or(ErrorCode::CoordinatorNotAvailable)?
}
