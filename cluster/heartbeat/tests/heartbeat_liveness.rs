//! What the controller is told of brokers over real tonic on loopback: pings arrive with their
//! fields, a stream that closes is reported at once, a silent stream stays open without an
//! event (aging it out is the controller's, tested in `kaas-cluster`) and its pings resume on
//! it, malformed, oversized and missing pings end their stream, and a broker's new stream
//! replaces its old one.

mod support;

use std::time::Duration;

use kaas_cluster::ids::{
    AssignmentVersion, BrokerId, ControllerEpoch, LeaderEpoch, TopicName, TopicPartition,
};
use kaas_cluster_heartbeat::{ClientState, HeartbeatClient, HeartbeatEvent, HeartbeatServer, Ping};
use kaas_proto::heartbeat::heartbeat_client::HeartbeatClient as HeartbeatStub;
use kaas_proto::heartbeat::{BrokerPing, ControllerMessage};
use support::*;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

fn loopback() -> std::net::SocketAddr {
    "127.0.0.1:0".parse().expect("address")
}

#[tokio::test]
async fn pings_arrive_with_the_broker_endpoint_applied_assignment_and_fences() {
    let (server, mut events) = HeartbeatServer::bind(loopback(), server_options())
        .await
        .expect("bind");
    let client = HeartbeatClient::spawn(
        broker(3),
        Some(endpoint_of(server.local_addr())),
        client_options(),
        |_| {},
    );
    match next_event(&mut events).await {
        HeartbeatEvent::Joined(status) => {
            assert_eq!(status.broker, broker(3));
            assert_eq!(status.applied, None);
            assert!(status.fenced.is_empty());
        }
        other => panic!("expected a join, got {other:?}"),
    }
    let applied = (ControllerEpoch(2), AssignmentVersion(7));
    let fenced = vec![(
        TopicPartition::new(TopicName::new("orders").expect("name"), 4),
        LeaderEpoch(11),
    )];
    client.set_fenced(fenced.clone());
    client.set_applied(applied.0, applied.1);
    loop {
        match next_event(&mut events).await {
            HeartbeatEvent::Pinged(status) => {
                assert_eq!(status.broker, broker(3));
                if status.applied == Some(applied) {
                    assert_eq!(status.fenced, fenced);
                    break;
                }
            }
            other => panic!("expected pings, got {other:?}"),
        }
    }
    let connected = server.brokers();
    assert_eq!(connected.len(), 1);
    assert_eq!(connected[0].broker, broker(3));
    assert_eq!(connected[0].applied, Some(applied));
    assert_eq!(connected[0].fenced, fenced);
    client.stop().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_dropped_clients_stream_end_is_reported_at_once() {
    // Nothing here ages a broker out: the only event after the join is the stream's end.
    let (server, mut events) = HeartbeatServer::bind(loopback(), server_options())
        .await
        .expect("bind");
    let endpoint = endpoint_of(server.local_addr());
    for stop_politely in [false, true] {
        let client =
            HeartbeatClient::spawn(broker(1), Some(endpoint.clone()), client_options(), |_| {});
        assert!(matches!(
            next_change(&mut events).await,
            HeartbeatEvent::Joined(_)
        ));
        if stop_politely {
            client.stop().await;
        } else {
            drop(client);
        }
        match next_change(&mut events).await {
            HeartbeatEvent::StreamClosed { broker, .. } => {
                assert_eq!(broker, BrokerId(1));
            }
            other => panic!("expected a departure, got {other:?}"),
        }
        assert!(server.brokers().is_empty());
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_silent_client_keeps_its_stream_without_an_event_and_its_pings_resume_on_it() {
    let (server, mut events) = HeartbeatServer::bind(loopback(), server_options())
        .await
        .expect("bind");
    let client = HeartbeatClient::spawn(
        broker(2),
        Some(endpoint_of(server.local_addr())),
        client_options(),
        |_| {},
    );
    assert!(matches!(
        next_change(&mut events).await,
        HeartbeatEvent::Joined(_)
    ));
    client.set_pings_paused(true);
    // Ten intervals of silence, more than any age-out a test would set: the server reports
    // nothing but the pings sent before the pause, and keeps the stream.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut last_seen = None;
    while let Ok(event) = events.try_recv() {
        match event {
            HeartbeatEvent::Pinged(status) => last_seen = Some(status.last_ping),
            other => panic!("expected no event but pings, got {other:?}"),
        }
    }
    assert_eq!(server.brokers().len(), 1);
    let endpoint = endpoint_of(server.local_addr());
    assert_eq!(
        *client.state().borrow(),
        ClientState::Connected {
            endpoint: endpoint.clone(),
            stream: 1
        },
        "the stream stays open while the broker is silent"
    );
    let paused_at = std::time::Instant::now();
    client.set_pings_paused(false);
    match next_event(&mut events).await {
        HeartbeatEvent::Pinged(status) => {
            assert_eq!(status.broker, broker(2));
            assert!(status.last_ping >= paused_at, "{last_seen:?}");
        }
        other => panic!("expected a ping on the same stream, got {other:?}"),
    }
    assert_eq!(
        *client.state().borrow(),
        ClientState::Connected {
            endpoint,
            stream: 1
        }
    );
    assert_eq!(server.brokers().len(), 1);
    client.stop().await;
    server.shutdown().await;
}

/// A stream driven by hand: pings go in through the sender, controller messages come out.
async fn raw_stream(
    server: &HeartbeatServer,
) -> (mpsc::Sender<BrokerPing>, Streaming<ControllerMessage>) {
    let mut stub = HeartbeatStub::connect(format!("http://{}", server.local_addr()))
        .await
        .expect("connect");
    let (pings, outbound) = mpsc::channel(8);
    let inbound = stub
        .session(ReceiverStream::new(outbound))
        .await
        .expect("stream")
        .into_inner();
    (pings, inbound)
}

async fn stream_error(inbound: &mut Streaming<ControllerMessage>) -> tonic::Status {
    match tokio::time::timeout(PATIENCE, inbound.message()).await {
        Ok(Err(status)) => status,
        other => panic!("expected the stream to fail, got {other:?}"),
    }
}

#[tokio::test]
async fn malformed_pings_end_their_stream() {
    let (server, mut events) = HeartbeatServer::bind(loopback(), server_options())
        .await
        .expect("bind");
    let mut bad_pings = Vec::new();
    let mut negative = Ping::new(broker(0)).to_wire();
    negative.broker_id = -1;
    bad_pings.push(negative);
    let mut no_endpoint = Ping::new(broker(0)).to_wire();
    no_endpoint.endpoint = None;
    bad_pings.push(no_endpoint);
    let mut port_zero = Ping::new(broker(0)).to_wire();
    if let Some(endpoint) = port_zero.endpoint.as_mut() {
        endpoint.port = 0;
    }
    bad_pings.push(port_zero);
    let mut bad_fence = Ping::new(broker(0)).to_wire();
    bad_fence
        .fenced
        .push(kaas_proto::heartbeat::FencedPartition {
            topic: "no/slashes".into(),
            partition: 0,
            claim_epoch: 1,
        });
    bad_pings.push(bad_fence);
    for bad in bad_pings {
        let (pings, mut inbound) = raw_stream(&server).await;
        pings.send(bad.clone()).await.expect("send");
        let status = stream_error(&mut inbound).await;
        assert_eq!(
            status.code(),
            tonic::Code::InvalidArgument,
            "{bad:?}: {status:?}"
        );
    }
    // A stream that changes broker: it joined as broker 4, so it departs.
    let (pings, mut inbound) = raw_stream(&server).await;
    pings
        .send(Ping::new(broker(4)).to_wire())
        .await
        .expect("send");
    match next_change(&mut events).await {
        HeartbeatEvent::Joined(status) => assert_eq!(status.broker, broker(4)),
        other => panic!("expected a join, got {other:?}"),
    }
    pings
        .send(Ping::new(broker(5)).to_wire())
        .await
        .expect("send");
    assert_eq!(
        stream_error(&mut inbound).await.code(),
        tonic::Code::InvalidArgument
    );
    match next_change(&mut events).await {
        HeartbeatEvent::StreamClosed { broker, .. } => {
            assert_eq!(broker, BrokerId(4));
        }
        other => panic!("expected a departure, got {other:?}"),
    }
    // The malformed pings before it made no event at all.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(events.try_recv().is_err());
    server.shutdown().await;
}

#[tokio::test]
async fn a_brokers_new_stream_replaces_its_old_one() {
    let (server, mut events) = HeartbeatServer::bind(loopback(), server_options())
        .await
        .expect("bind");
    let ping = Ping::new(broker(6)).to_wire();
    let (old_pings, mut old_inbound) = raw_stream(&server).await;
    old_pings.send(ping.clone()).await.expect("send");
    assert!(matches!(
        next_change(&mut events).await,
        HeartbeatEvent::Joined(_)
    ));
    let (new_pings, new_inbound) = raw_stream(&server).await;
    new_pings.send(ping).await.expect("send");
    assert!(matches!(
        next_change(&mut events).await,
        HeartbeatEvent::Joined(_)
    ));
    // The server ends the old stream, and that is no departure.
    match tokio::time::timeout(PATIENCE, old_inbound.message()).await {
        Ok(Ok(None)) => {}
        other => panic!("expected the old stream to end, got {other:?}"),
    }
    drop(old_pings);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        events.try_recv().is_err(),
        "the old stream's end is not a departure"
    );
    assert_eq!(server.brokers().len(), 1);
    drop(new_pings);
    drop(new_inbound);
    match next_change(&mut events).await {
        HeartbeatEvent::StreamClosed { broker, .. } => {
            assert_eq!(broker, BrokerId(6));
        }
        other => panic!("expected a departure, got {other:?}"),
    }
    server.shutdown().await;
}

#[tokio::test]
async fn oversized_and_missing_first_pings_end_the_stream_and_the_server_keeps_serving() {
    let (server, mut events) = HeartbeatServer::bind(loopback(), server_options())
        .await
        .expect("bind");
    // More than the 1 MiB a ping may take: refused before it is decoded.
    let mut huge = Ping::new(broker(0)).to_wire();
    let topic = "t".repeat(249);
    huge.fenced = (0..5000)
        .map(|partition| kaas_proto::heartbeat::FencedPartition {
            topic: topic.clone(),
            partition,
            claim_epoch: 1,
        })
        .collect();
    let (pings, mut inbound) = raw_stream(&server).await;
    pings.send(huge).await.expect("send");
    let status = stream_error(&mut inbound).await;
    assert_eq!(status.code(), tonic::Code::OutOfRange, "{status:?}");
    // A stream that never pings is closed once the first-ping time has passed.
    let (_silent_pings, mut silent) = raw_stream(&server).await;
    let status = stream_error(&mut silent).await;
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");
    assert!(events.try_recv().is_err(), "neither stream made an event");
    // The server still serves well-behaved brokers.
    let client = HeartbeatClient::spawn(
        broker(1),
        Some(endpoint_of(server.local_addr())),
        client_options(),
        |_| {},
    );
    match next_change(&mut events).await {
        HeartbeatEvent::Joined(status) => assert_eq!(status.broker, broker(1)),
        other => panic!("expected a join, got {other:?}"),
    }
    client.stop().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_port_in_use_is_a_bind_error() {
    let (server, _events) = HeartbeatServer::bind(loopback(), server_options())
        .await
        .expect("bind");
    match HeartbeatServer::bind(server.local_addr(), server_options()).await {
        Err(kaas_cluster_heartbeat::HeartbeatError::Bind { address, source }) => {
            assert_eq!(address, server.local_addr());
            assert_eq!(source.kind(), std::io::ErrorKind::AddrInUse);
        }
        Ok(_) => panic!("a second server bound {}", server.local_addr()),
    }
    server.shutdown().await;
}
