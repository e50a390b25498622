//! A follower's `LeaseCampaign` on the real API server learns of every write to the Lease
//! when it happens (a watch), not at its next renew-period read: a campaign whose renew
//! period is 30 s reports a new holder's heartbeat endpoint as soon as the Lease names it,
//! and takes an expired Lease over one lease duration after the holder's last renewal (never
//! before), naming the holder it took over from, long before its next read would even look.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use kaas_cluster::ids::{BrokerId, ControllerEpoch};
use kaas_cluster_core::{LeaseEvent, LeaseSource};
use kaas_cluster_heartbeat::ControllerEndpoint;
use kaas_cluster_kube::lease::{Candidate, ControllerLease, LeaseOutcome, LeaseRecord};
use kaas_cluster_kube::lease_campaign::{CampaignOptions, LeaseCampaign};
use kaas_cluster_kube::{KubeContext, SharedContext};
use kaas_test_support::apiserver::{admin_client, fresh_namespace};
use tokio::sync::mpsc::UnboundedReceiver;

/// Far longer than the test: a campaign that only read at its renew period would see
/// nothing after its first read.
const RENEW: Duration = Duration::from_secs(30);
const LEASE: Duration = Duration::from_secs(3);

fn won(outcome: LeaseOutcome) -> LeaseRecord {
    match outcome {
        LeaseOutcome::Won(record) => record,
        LeaseOutcome::Lost(current) => panic!("expected to win, lost to {current:?}"),
    }
}

/// The first event within `within` that `wanted` accepts, skipping others (a holder
/// reported twice when the watch delivers a write after the write's own answer did).
async fn event_until(
    events: &mut UnboundedReceiver<LeaseEvent>,
    within: Duration,
    wanted: impl Fn(&LeaseEvent) -> bool,
) -> LeaseEvent {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let event = tokio::time::timeout_at(deadline, events.recv())
            .await
            .unwrap_or_else(|_| panic!("no such Lease event within {within:?}"))
            .expect("the campaign runs");
        if wanted(&event) {
            return event;
        }
    }
}

fn is_acquired(event: &LeaseEvent) -> bool {
    matches!(event, LeaseEvent::Acquired { .. })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_sees_each_write_at_once_and_takes_over_one_duration_after_the_last() {
    let client = admin_client().await;
    let namespace = fresh_namespace(&client, "lease-watch").await;
    let context = KubeContext::new(client, namespace);
    let lease = ControllerLease::new(&context);
    let holder = Candidate {
        identity: "kaas-0".into(),
        lease_duration: LEASE,
        heartbeat_endpoint: "10.1.0.7:9094".into(),
    };

    let mut campaign = LeaseCampaign::new(
        SharedContext::ready(context.clone()),
        CampaignOptions::new("kaas-1", LEASE, RENEW),
    );
    let own = ControllerEndpoint::new("10.1.0.8", 9094);
    let mut events = campaign.start(own.clone());
    // The first read: no Lease yet, so the follower creates it and leads. Release it at once
    // so kaas-0 can take it (the release keeps kaas-1 quiet for a lease duration).
    let acquired = event_until(&mut events, Duration::from_secs(10), is_acquired).await;
    let LeaseEvent::Acquired {
        epoch,
        expired_holder,
        ..
    } = acquired
    else {
        unreachable!()
    };
    assert_eq!(
        expired_holder, None,
        "a new Lease has no holder to take over from"
    );
    tokio::time::timeout(Duration::from_secs(5), campaign.release(epoch))
        .await
        .unwrap();

    // kaas-0 takes the released Lease: the follower reports its endpoint from the watch.
    let released = lease.read().await.unwrap().unwrap();
    let mut held = won(lease.acquire(Some(&released), &holder).await.unwrap());
    let kaas_0 = LeaseEvent::Holder(Some("10.1.0.7:9094".parse().unwrap()));
    event_until(&mut events, Duration::from_secs(2), |e| *e == kaas_0).await;
    // kaas-0 renews for a while (each renewal restarts the follower's expiry clock), then
    // stops renewing as a killed controller does.
    let mut last_renewal = Instant::now();
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        held = won(lease.renew(&held, &holder).await.unwrap());
        last_renewal = Instant::now();
    }
    let taken = event_until(&mut events, LEASE + Duration::from_secs(3), is_acquired).await;
    let at = Instant::now();
    let LeaseEvent::Acquired {
        epoch: taken_epoch,
        expired_holder,
        ..
    } = taken
    else {
        unreachable!()
    };
    // Never before one lease duration without a change (the follower saw the last renewal a
    // little before this test's `last_renewal`, at most by the request's return trip).
    assert!(
        at + Duration::from_millis(200) >= last_renewal + LEASE,
        "taken over {:?} after the last renewal",
        at - last_renewal
    );
    assert!(
        at < last_renewal + LEASE + Duration::from_secs(3),
        "taken over only {:?} after the last renewal",
        at - last_renewal
    );
    assert_eq!(expired_holder, Some(BrokerId(0)));
    assert_eq!(taken_epoch, ControllerEpoch(held.epoch().0 + 1));
    let now = lease.read().await.unwrap().unwrap();
    assert_eq!(now.holder.as_deref(), Some("kaas-1"));
    assert_eq!(now.heartbeat_endpoint.as_deref(), Some("10.1.0.8:9094"));
}
