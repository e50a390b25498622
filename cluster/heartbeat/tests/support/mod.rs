//! Helpers shared by the heartbeat tests: brokers, fast timings, waiting for events with a
//! bound (a missing event fails the test instead of hanging it).

#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use kaas_cluster::assignment::BrokerEndpoint;
use kaas_cluster::ids::BrokerId;
use kaas_cluster_heartbeat::{
    ClientOptions, ClientState, ControllerEndpoint, HeartbeatEvent, ServerOptions,
};
use tokio::sync::{mpsc, watch};

/// How long a test waits for something that should happen within a few intervals.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// Broker `id`, advertising `127.0.0.<id + 1>:19092`.
pub fn broker(id: i32) -> BrokerEndpoint {
    BrokerEndpoint {
        id: BrokerId(id),
        host: format!("127.0.0.{}", id + 1),
        port: 19092,
    }
}

/// Pings every 200 ms; a stream must send its first ping within 1 s.
pub fn server_options() -> ServerOptions {
    ServerOptions {
        ping_interval: Duration::from_millis(200),
        first_ping_within: Duration::from_secs(1),
    }
}

/// The client side of [`server_options`], redialing within 50–400 ms.
pub fn client_options() -> ClientOptions {
    ClientOptions {
        ping_interval: Duration::from_millis(200),
        redial_first: Duration::from_millis(50),
        redial_cap: Duration::from_millis(400),
        connect_timeout: Duration::from_secs(2),
    }
}

/// The endpoint a client dials to reach a server bound at `address`.
pub fn endpoint_of(address: SocketAddr) -> ControllerEndpoint {
    ControllerEndpoint::new(address.ip().to_string(), address.port())
}

/// The next event, within [`PATIENCE`].
pub async fn next_event(events: &mut mpsc::UnboundedReceiver<HeartbeatEvent>) -> HeartbeatEvent {
    match tokio::time::timeout(PATIENCE, events.recv()).await {
        Ok(Some(event)) => event,
        Ok(None) => panic!("the server's event channel closed"),
        Err(_) => panic!("no heartbeat event within {PATIENCE:?}"),
    }
}

/// The next event that is not a ping.
pub async fn next_change(events: &mut mpsc::UnboundedReceiver<HeartbeatEvent>) -> HeartbeatEvent {
    loop {
        match next_event(events).await {
            HeartbeatEvent::Pinged(_) => continue,
            event => return event,
        }
    }
}

/// Waits until the client's state satisfies `wanted`, within [`PATIENCE`].
pub async fn wait_for_state(
    state: &mut watch::Receiver<ClientState>,
    wanted: impl FnMut(&ClientState) -> bool,
) -> ClientState {
    let outcome = match tokio::time::timeout(PATIENCE, state.wait_for(wanted)).await {
        Ok(Ok(state)) => Some(state.clone()),
        Ok(Err(_)) => panic!("the client stopped"),
        Err(_) => None,
    };
    outcome.unwrap_or_else(|| panic!("client state now {:?}", *state.borrow()))
}
