//! Running transaction work on the coordinator of a transactional id: the shard leading the
//! id's `__transaction_state` partition ([`crate::transactions::partition_for`]).

use std::future::Future;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::model::cluster_view::{ClusterView, Leadership};
use crate::protocol::ErrorCode;
use crate::shard::transaction_coordinators::Driver;
use crate::shard::Shard;
use crate::transactions::{partition_for, TRANSACTION_STATE_TOPIC};

/// How long a request that finds the coordinator busy with another change of the same
/// transaction (CONCURRENT_TRANSACTIONS: typically the previous transaction's markers, or
/// another partition's add, each a few fsyncs long) is asked again before that answer goes
/// back. Kafka answers at once and clients retry after a backoff (librdkafka: 20 ms); asking
/// again here spares the client that wait. Only timing differs.
pub const BUSY_WAIT: Duration = Duration::from_millis(250);
const FIRST_BACKOFF: Duration = Duration::from_millis(2);
const MAX_BACKOFF: Duration = Duration::from_millis(50);

/// Calls `ask` until `busy` says its answer is not CONCURRENT_TRANSACTIONS, or [`BUSY_WAIT`]
/// has passed; the last answer.
pub async fn while_busy<T, Fut>(mut ask: impl FnMut() -> Fut, busy: impl Fn(&T) -> bool) -> T
where
    Fut: Future<Output = T>,
{
    let started = Instant::now();
    let mut backoff = FIRST_BACKOFF;
    loop {
        let answer = ask().await;
        if !busy(&answer) || started.elapsed() >= BUSY_WAIT {
            return answer;
        }
        glommio::timer::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// The broker coordinating `transactional_id`: the leader of its `__transaction_state`
/// partition in the view's assignment; `None` while the topic is not placed.
pub fn coordinator_broker(view: &ClusterView, transactional_id: &str) -> Option<i32> {
    let cluster = view.cluster.as_ref()?;
    let topic = kaas_cluster::ids::TopicName::new(TRANSACTION_STATE_TOPIC).ok()?;
    let partition = kaas_cluster::ids::TopicPartition::new(topic, partition_for(transactional_id));
    cluster
        .leader_of(&partition)
        .map(|placement| placement.leader.0)
}

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

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::shard::test_support::run;

    #[test]
    fn a_busy_coordinator_is_asked_again_until_it_answers_or_the_wait_ends() {
        run(|_| {
            Box::pin(async move {
                let asked = Cell::new(0);
                let answer = while_busy(
                    || {
                        asked.set(asked.get() + 1);
                        let code = if asked.get() < 4 {
                            ErrorCode::ConcurrentTransactions
                        } else {
                            ErrorCode::None
                        };
                        async move { code }
                    },
                    |code| *code == ErrorCode::ConcurrentTransactions,
                )
                .await;
                assert_eq!((answer, asked.get()), (ErrorCode::None, 4));

                let started = Instant::now();
                let answer = while_busy(
                    || async { ErrorCode::ConcurrentTransactions },
                    |code| *code == ErrorCode::ConcurrentTransactions,
                )
                .await;
                assert_eq!(answer, ErrorCode::ConcurrentTransactions);
                assert!(started.elapsed() >= BUSY_WAIT);
                assert!(started.elapsed() < BUSY_WAIT * 4, "bounded");
            })
        });
    }
}
