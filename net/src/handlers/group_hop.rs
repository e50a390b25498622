//! Running group work on the group's coordinator shard.

use std::future::Future;
use std::rc::Rc;

use crate::broker::shard::Shard;
use crate::groups::placement::coordinator_shard;
use crate::protocol::ErrorCode;

/// Runs `job` on the shard coordinating `group_id`; COORDINATOR_NOT_AVAILABLE if that shard
/// has stopped.
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
    let target = coordinator_shard(group_id, shard.router.shards());
    shard
        .router
        .call(shard, target, job)
        .await
        .ok_or(ErrorCode::CoordinatorNotAvailable)
}
