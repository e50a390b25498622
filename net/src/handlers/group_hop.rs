//! Running group work on the group's coordinator shard.

use std::future::Future;
use std::rc::Rc;

use crate::groups::placement::coordinator_shard;
use crate::protocol::ErrorCode;
use crate::shard::Shard;

/// Runs `job` on the shard coordinating `group_id`; COORDINATOR_NOT_AVAILABLE if that shard
/// has stopped, NOT_COORDINATOR when the cluster view has another broker coordinate the group
/// (or no assignment is accepted yet), so the client asks FindCoordinator again.
pub async fn on_coordinator<R, F, Fut>(
    shard: &Rc<Shard>,
    group_id: &str,
    job: F,
) -> Result<R, ErrorCode>
where
    F: FnOnce(Rc<Shard>) -> Fut + Send + 'static,
    Fut: Future<Output = R> + 'static,
    R: Send + 'static,
{
    if shard.view.load().is_cluster()
        && crate::handlers::find_coordinator::group_broker(shard, group_id)
            != Some(shard.config.node_id)
    {
        return Err(ErrorCode::NotCoordinator);
    }
    let target = coordinator_shard(group_id, shard.router.shards());
    shard
        .router
        .call(shard, target, job)
        .await
        .ok_or(ErrorCode::CoordinatorNotAvailable)
}
