//! The controller Lease on a real API server: of two brokers racing for it exactly one wins
//! and the other learns who; a take-over after expiry raises the epoch by exactly one; a
//! release lets another broker win at once at a higher epoch; renewals keep the epoch; and
//! the epoch file on the volume (`kaas-cluster-file`'s) keeps the highest epoch used, so a
//! Lease recreated at epoch 1 is taken over again above it (`acquire_above`).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use kaas_cluster::ids::ControllerEpoch;
use kaas_cluster_file::{read_recorded_epoch, record_epoch};
use kaas_cluster_kube::lease::{Candidate, ControllerLease, LeaseOutcome, LeaseRecord};
use kaas_cluster_kube::KubeContext;
use kaas_test_support::apiserver::{admin_client, fresh_namespace};

fn candidate(identity: &str, seconds: u64) -> Candidate {
    Candidate {
        identity: identity.to_owned(),
        lease_duration: Duration::from_secs(seconds),
        heartbeat_endpoint: format!("{identity}.kaas:9094"),
    }
}

async fn context(prefix: &str) -> KubeContext {
    let client = admin_client().await;
    let namespace = fresh_namespace(&client, prefix).await;
    KubeContext::new(client, namespace)
}

fn won(outcome: LeaseOutcome) -> LeaseRecord {
    match outcome {
        LeaseOutcome::Won(record) => record,
        LeaseOutcome::Lost(current) => panic!("expected to win, lost to {current:?}"),
    }
}

fn lost(outcome: LeaseOutcome) -> Option<LeaseRecord> {
    match outcome {
        LeaseOutcome::Lost(current) => current,
        LeaseOutcome::Won(record) => panic!("expected to lose, won {record:?}"),
    }
}

#[tokio::test]
async fn two_brokers_racing_for_a_new_lease_one_wins_the_other_learns_the_holder() {
    let context = context("lease-race-new").await;
    let lease = ControllerLease::new(&context);
    assert!(lease.read().await.unwrap().is_none());
    let (a, b) = (candidate("kaas-0", 15), candidate("kaas-1", 15));
    let (first, second) = tokio::join!(lease.acquire(None, &a), lease.acquire(None, &b));
    let outcomes = [first.unwrap(), second.unwrap()];
    let winners: Vec<&LeaseRecord> = outcomes
        .iter()
        .filter_map(|o| match o {
            LeaseOutcome::Won(record) => Some(record),
            LeaseOutcome::Lost(_) => None,
        })
        .collect();
    assert_eq!(winners.len(), 1, "exactly one winner: {outcomes:?}");
    let winner = winners[0].holder.clone().unwrap();
    assert_eq!(winners[0].epoch(), ControllerEpoch(1));
    for outcome in &outcomes {
        if let LeaseOutcome::Lost(current) = outcome {
            let current = current.as_ref().expect("the loser sees the Lease");
            assert_eq!(current.holder.as_deref(), Some(winner.as_str()));
            assert_eq!(
                current.heartbeat_endpoint.as_deref(),
                Some(format!("{winner}.kaas:9094").as_str())
            );
        }
    }
}

#[tokio::test]
async fn two_brokers_racing_to_take_over_one_wins_at_exactly_the_next_epoch() {
    let context = context("lease-race-takeover").await;
    let lease = ControllerLease::new(&context);
    let held = won(lease.acquire(None, &candidate("kaas-0", 1)).await.unwrap());
    // Both contenders saw the same (expired) Lease and send the same compare-and-swap.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let observed = lease.read().await.unwrap().unwrap();
    assert!(observed.is_free_at(k8s_openapi::jiff::Timestamp::now()));
    let (b, c) = (candidate("kaas-1", 15), candidate("kaas-2", 15));
    let (first, second) = tokio::join!(
        lease.acquire(Some(&observed), &b),
        lease.acquire(Some(&observed), &c)
    );
    let outcomes = [first.unwrap(), second.unwrap()];
    let winners: Vec<LeaseRecord> = outcomes
        .iter()
        .filter_map(|o| match o {
            LeaseOutcome::Won(record) => Some(record.clone()),
            LeaseOutcome::Lost(_) => None,
        })
        .collect();
    assert_eq!(winners.len(), 1, "exactly one winner: {outcomes:?}");
    assert_eq!(winners[0].transitions, held.transitions + 1);
    let now = lease.read().await.unwrap().unwrap();
    assert_eq!(now.holder, winners[0].holder);
    assert_eq!(now.epoch(), ControllerEpoch(2));
    // The deposed holder's renewal carries a stale resourceVersion and loses.
    let current = lost(lease.renew(&held, &candidate("kaas-0", 1)).await.unwrap());
    assert_eq!(current.unwrap().holder, winners[0].holder);
}

#[tokio::test]
async fn renewals_keep_the_epoch_and_a_release_lets_another_broker_win_at_once() {
    let context = context("lease-release").await;
    let lease = ControllerLease::new(&context);
    let data = tempfile::tempdir().unwrap();
    let epochs = kaas_volume::cluster_dir(data.path());

    let a = candidate("kaas-0", 60);
    let mut held = won(lease.acquire(None, &a).await.unwrap());
    assert_eq!(record_epoch(&epochs, held.epoch()).unwrap(), held.epoch());
    for _ in 0..3 {
        let renewed = won(lease.renew(&held, &a).await.unwrap());
        assert_eq!(
            renewed.transitions, held.transitions,
            "a renewal keeps the epoch"
        );
        assert!(renewed.renew_time > held.renew_time);
        assert_ne!(renewed.resource_version, held.resource_version);
        held = renewed;
    }
    // Still held for 60 s: the other broker sees it held, not free.
    let seen = lease.read().await.unwrap().unwrap();
    assert!(!seen.is_free_at(k8s_openapi::jiff::Timestamp::now()));

    let released = won(lease.release(&held).await.unwrap());
    assert_eq!(released.holder, None);
    assert_eq!(
        released.transitions, held.transitions,
        "a release re-sends the epoch"
    );
    assert_eq!(released.heartbeat_endpoint, None);

    let seen = lease.read().await.unwrap().unwrap();
    assert!(
        seen.is_free_at(k8s_openapi::jiff::Timestamp::now()),
        "free at once"
    );
    let b = candidate("kaas-1", 60);
    let taken = won(lease.acquire(Some(&seen), &b).await.unwrap());
    assert_eq!(taken.epoch(), ControllerEpoch(held.epoch().0 + 1));
    assert_eq!(
        taken.heartbeat_endpoint.as_deref(),
        Some("kaas-1.kaas:9094")
    );
    assert_eq!(record_epoch(&epochs, taken.epoch()).unwrap(), taken.epoch());

    // The first broker's stale view of the Lease cannot win it back.
    assert!(matches!(
        lease.acquire(Some(&held), &a).await.unwrap(),
        LeaseOutcome::Lost(_)
    ));
    // Epochs never rewind on the volume: recording the old epoch leaves the higher one.
    assert_eq!(record_epoch(&epochs, held.epoch()).unwrap(), taken.epoch());
    assert_eq!(read_recorded_epoch(&epochs).unwrap(), Some(taken.epoch()));
}

#[tokio::test]
async fn a_lease_recreated_at_a_lower_epoch_is_refused_by_the_epoch_file() {
    let context = context("lease-rewound").await;
    let lease = ControllerLease::new(&context);
    let data = tempfile::tempdir().unwrap();
    let epochs = kaas_volume::cluster_dir(data.path());
    let a = candidate("kaas-0", 1);
    let mut held = won(lease.acquire(None, &a).await.unwrap());
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let seen = lease.read().await.unwrap().unwrap();
        held = won(lease.acquire(Some(&seen), &a).await.unwrap());
    }
    assert_eq!(held.epoch(), ControllerEpoch(3));
    assert_eq!(record_epoch(&epochs, held.epoch()).unwrap(), held.epoch());
    // Someone deletes the Lease (or etcd is restored): a new Lease starts at epoch 1 again.
    kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
        context.client.clone(),
        &context.namespace,
    )
    .delete("kaas-controller", &Default::default())
    .await
    .unwrap();
    let fresh = won(lease.acquire(None, &candidate("kaas-1", 15)).await.unwrap());
    assert_eq!(fresh.epoch(), ControllerEpoch(1));
    assert_eq!(
        record_epoch(&epochs, fresh.epoch()).unwrap(),
        ControllerEpoch(3),
        "the volume keeps the higher epoch: the controller refuses to lead at 1"
    );
    assert_eq!(
        read_recorded_epoch(&epochs).unwrap(),
        Some(ControllerEpoch(3))
    );
    // The new holder takes its own Lease over again above the volume's epoch.
    let above = won(lease
        .acquire_above(Some(&fresh), &candidate("kaas-1", 15), ControllerEpoch(3))
        .await
        .unwrap());
    assert_eq!(above.epoch(), ControllerEpoch(4));
    assert_eq!(
        record_epoch(&epochs, above.epoch()).unwrap(),
        ControllerEpoch(4)
    );
}
