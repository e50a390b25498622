//! Running per-partition work on the shards that own the partitions: one hop per shard,
//! carrying all of that shard's partitions, results put back in request order.

use std::future::Future;
use std::rc::Rc;

use kaas_engine::PartitionId;

use crate::broker::shard::Shard;

/// One partition's work item: its position in the response, its id, and its input.
pub struct Item<I> {
    /// Index the result goes back to.
    pub slot: usize,
    /// The partition.
    pub id: PartitionId,
    /// The work's input.
    pub input: I,
}

/// Runs `work` for every item on the item's owner shard; returns `(slot, output)` pairs.
/// Items of a stopped shard are missing from the output.
pub async fn run_on_owners<I, O, F, Fut>(
    shard: &Rc<Shard>,
    items: Vec<Item<I>>,
    work: F,
) -> Vec<(usize, O)>
where
    I: Send + 'static,
    O: Send + 'static,
    F: Fn(Rc<Shard>, Vec<Item<I>>) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = Vec<(usize, O)>> + 'static,
{
    let view = shard.view.load();
    let mut groups: Vec<Vec<Item<I>>> = (0..shard.router.shards()).map(|_| Vec::new()).collect();
    for item in items {
        let owner = view.owner_shard(&item.id.topic, item.id.partition);
        groups[owner].push(item);
    }
    let calls = groups
        .into_iter()
        .enumerate()
        .filter(|(_, group)| !group.is_empty())
        .map(|(target, group)| {
            let work = work.clone();
            shard
                .router
                .call(shard, target, move |owner| work(owner, group))
        });
    futures_util::future::join_all(calls)
        .await
        .into_iter()
        .flatten()
        .flatten()
        .collect()
}
