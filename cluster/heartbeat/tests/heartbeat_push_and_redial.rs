//! The push and the client's redialing over real tonic on loopback: ASSIGNMENT_CHANGED reaches
//! every connected broker it names and no other, clients dial again after the controller's server restarts, wait
//! while no endpoint is known, and move at once to a new endpoint.

mod support;

use kaas_cluster::ids::{AssignmentVersion, BrokerId, ControllerEpoch};
use kaas_cluster_heartbeat::{
    AssignmentChangedNotice, ClientState, HeartbeatClient, HeartbeatEvent, HeartbeatServer,
};
use std::collections::BTreeSet;
use std::time::Duration;
use support::*;
use tokio::sync::mpsc;

fn loopback() -> std::net::SocketAddr {
    "127.0.0.1:0".parse().expect("address")
}

#[tokio::test]
async fn assignment_changed_reaches_every_named_connected_broker() {
    let (server, mut events) = HeartbeatServer::bind(loopback(), server_options())
        .await
        .expect("bind");
    let endpoint = endpoint_of(server.local_addr());
    let mut clients = Vec::new();
    let mut notices = Vec::new();
    for id in 0..3 {
        let (sender, receiver) = mpsc::unbounded_channel();
        notices.push(receiver);
        clients.push(HeartbeatClient::spawn(
            broker(id),
            Some(endpoint.clone()),
            client_options(),
            move |notice| {
                let _ = sender.send(notice);
            },
        ));
    }
    let mut joined = Vec::new();
    while joined.len() < 3 {
        if let HeartbeatEvent::Joined(status) = next_change(&mut events).await {
            joined.push(status.broker.id);
        }
    }
    joined.sort();
    assert_eq!(joined, vec![BrokerId(0), BrokerId(1), BrokerId(2)]);
    let named: BTreeSet<BrokerId> = joined.iter().copied().collect();
    for version in [5, 6] {
        let queued =
            server.push_assignment_changed(AssignmentVersion(version), ControllerEpoch(2), &named);
        assert_eq!(queued, 3);
        for receiver in &mut notices {
            let notice = tokio::time::timeout(PATIENCE, receiver.recv())
                .await
                .expect("a notice in time")
                .expect("a notice");
            assert_eq!(
                notice,
                AssignmentChangedNotice {
                    version: AssignmentVersion(version),
                    controller_epoch: ControllerEpoch(2),
                }
            );
        }
    }
    // Only the named brokers' streams get it; a named broker with no stream is skipped.
    let some: BTreeSet<BrokerId> = [BrokerId(1), BrokerId(9)].into();
    let queued = server.push_assignment_changed(AssignmentVersion(7), ControllerEpoch(2), &some);
    assert_eq!(queued, 1);
    let notice = tokio::time::timeout(PATIENCE, notices[1].recv())
        .await
        .expect("a notice in time")
        .expect("a notice");
    assert_eq!(notice.version, AssignmentVersion(7));
    assert!(notices[0].try_recv().is_err());
    assert!(notices[2].try_recv().is_err());
    for client in clients {
        client.stop().await;
    }
    server.shutdown().await;
}

/// Binds `address` again, waiting while the old listener's port is still being released.
async fn rebind(
    address: std::net::SocketAddr,
) -> (HeartbeatServer, mpsc::UnboundedReceiver<HeartbeatEvent>) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        match HeartbeatServer::bind(address, server_options()).await {
            Ok(bound) => return bound,
            Err(error) if tokio::time::Instant::now() < deadline => {
                eprintln!("rebinding {address}: {error}; retrying");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(error) => panic!("rebinding {address}: {error}"),
        }
    }
}

#[tokio::test]
async fn clients_redial_after_the_server_restarts() {
    let (server, mut events) = HeartbeatServer::bind(loopback(), server_options())
        .await
        .expect("bind");
    let address = server.local_addr();
    let endpoint = endpoint_of(address);
    let client =
        HeartbeatClient::spawn(broker(0), Some(endpoint.clone()), client_options(), |_| {});
    let mut state = client.state();
    assert!(matches!(
        next_change(&mut events).await,
        HeartbeatEvent::Joined(_)
    ));
    wait_for_state(&mut state, |s| {
        matches!(s, ClientState::Connected { stream: 1, .. })
    })
    .await;
    server.shutdown().await;
    wait_for_state(&mut state, |s| matches!(s, ClientState::Dialing(_))).await;
    // Left down for a few redial attempts.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (server, mut events) = rebind(address).await;
    match next_change(&mut events).await {
        HeartbeatEvent::Joined(status) => assert_eq!(status.broker, broker(0)),
        other => panic!("expected a join on the new server, got {other:?}"),
    }
    let now = wait_for_state(&mut state, |s| matches!(s, ClientState::Connected { .. })).await;
    assert_eq!(
        now,
        ClientState::Connected {
            endpoint,
            stream: 2
        }
    );
    client.stop().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_client_waits_for_an_endpoint_and_moves_at_once_to_a_new_one() {
    let (first, mut first_events) = HeartbeatServer::bind(loopback(), server_options())
        .await
        .expect("bind");
    let (second, mut second_events) = HeartbeatServer::bind(loopback(), server_options())
        .await
        .expect("bind");
    let client = HeartbeatClient::spawn(broker(1), None, client_options(), |_| {});
    let mut state = client.state();
    wait_for_state(&mut state, |s| *s == ClientState::Waiting).await;
    client.set_controller(Some(endpoint_of(first.local_addr())));
    assert!(matches!(
        next_change(&mut first_events).await,
        HeartbeatEvent::Joined(_)
    ));
    client.set_controller(Some(endpoint_of(second.local_addr())));
    match next_change(&mut first_events).await {
        HeartbeatEvent::StreamClosed { broker, .. } => {
            assert_eq!(broker, BrokerId(1));
        }
        other => panic!("expected a departure from the old controller, got {other:?}"),
    }
    assert!(matches!(
        next_change(&mut second_events).await,
        HeartbeatEvent::Joined(_)
    ));
    client.set_controller(None);
    assert!(matches!(
        next_change(&mut second_events).await,
        HeartbeatEvent::StreamClosed { .. }
    ));
    wait_for_state(&mut state, |s| *s == ClientState::Waiting).await;
    client.stop().await;
    first.shutdown().await;
    second.shutdown().await;
}
