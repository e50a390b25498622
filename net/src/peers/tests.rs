//! The peer client against scripted servers: Kafka request headers, one connection reused
//! for sequential calls, and a new one after the server closed it, a call timed out or an
//! answer did not match.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;

use super::test_server::{self, ScriptedServer};
use super::*;
use crate::protocol::messages::api_versions::{ApiVersionsRequest, ApiVersionsResponse};
use crate::protocol::{encode_response, RequestHeader};

const VERSION: i16 = 3;
const PATIENT: Duration = Duration::from_secs(10);

fn run<F: Future<Output = ()> + 'static>(test: impl FnOnce() -> F + Send + 'static) {
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move { test().await })
        .expect("executor")
        .join()
        .expect("join");
}

/// An ApiVersions answer to `header`, under `correlation_id`.
fn answer(header: &RequestHeader, correlation_id: i32) -> Vec<Bytes> {
    let body = ApiVersionsResponse {
        throttle_time_ms: 17,
        ..Default::default()
    };
    encode_response(correlation_id, header.api_version, &body)
}

fn endpoint(server: &ScriptedServer) -> Endpoint {
    Endpoint::new("127.0.0.1", server.port)
}

async fn api_versions(
    client: &PeerClient,
    to: &Endpoint,
    timeout: Duration,
) -> Result<ApiVersionsResponse, PeerError> {
    client
        .call::<ApiVersionsRequest, ApiVersionsResponse>(
            to,
            VERSION,
            &ApiVersionsRequest::default(),
            timeout,
        )
        .await
}

#[test]
fn sequential_calls_share_one_connection_and_carry_kafka_headers() {
    let server = test_server::start(Box::new(|_, _, header, _| {
        Some(answer(header, header.correlation_id))
    }));
    let to = endpoint(&server);
    run(move || async move {
        let client = PeerClient::for_broker(7);
        for _ in 0..3 {
            let answer = api_versions(&client, &to, PATIENT).await.expect("answer");
            assert_eq!(answer.throttle_time_ms, 17);
            assert!(client.is_connected(&to));
        }
    });
    assert_eq!(*server.connections.lock().expect("lock"), 1);
    let headers = server.headers.lock().expect("lock").clone();
    let ids: Vec<i32> = headers.iter().map(|h| h.correlation_id).collect();
    assert_eq!(ids, vec![0, 1, 2]);
    for header in headers {
        assert_eq!((header.api_key, header.api_version), (18, VERSION));
        assert_eq!(header.client_id.as_deref(), Some("kaas-broker-7"));
    }
}

#[test]
fn a_connection_the_server_closed_fails_one_call_and_is_made_again() {
    // The first connection answers its first request, then closes on the second.
    let server = test_server::start(Box::new(|request, connection, header, _| {
        (connection > 0 || request == 0).then(|| answer(header, header.correlation_id))
    }));
    let to = endpoint(&server);
    run(move || async move {
        let client = PeerClient::for_broker(1);
        api_versions(&client, &to, PATIENT).await.expect("first");
        let closed = api_versions(&client, &to, PATIENT).await;
        assert!(matches!(closed, Err(PeerError::Io { .. })), "{closed:?}");
        assert!(!client.is_connected(&to));
        api_versions(&client, &to, PATIENT)
            .await
            .expect("on a new connection");
        assert!(client.is_connected(&to));
    });
    assert_eq!(*server.connections.lock().expect("lock"), 2);
}

#[test]
fn a_call_that_times_out_drops_its_connection_so_a_late_answer_is_never_read() {
    let server = test_server::start(Box::new(|request, _, header, _| {
        if request == 0 {
            std::thread::sleep(Duration::from_millis(300));
        }
        Some(answer(header, header.correlation_id))
    }));
    let to = endpoint(&server);
    run(move || async move {
        let client = PeerClient::for_broker(1);
        let late = api_versions(&client, &to, Duration::from_millis(50)).await;
        assert!(matches!(late, Err(PeerError::TimedOut { .. })), "{late:?}");
        assert!(!client.is_connected(&to));
        api_versions(&client, &to, PATIENT)
            .await
            .expect("its own answer, on a new connection");
    });
    assert_eq!(*server.connections.lock().expect("lock"), 2);
}

#[test]
fn an_answer_to_another_request_is_refused_and_its_connection_dropped() {
    let server = test_server::start(Box::new(|request, _, header, _| {
        let correlation_id = header.correlation_id + i32::from(request == 0) * 100;
        Some(answer(header, correlation_id))
    }));
    let to = endpoint(&server);
    run(move || async move {
        let client = PeerClient::for_broker(1);
        let mismatched = api_versions(&client, &to, PATIENT).await;
        assert!(
            matches!(
                mismatched,
                Err(PeerError::CorrelationMismatch {
                    expected: 0,
                    received: 100,
                    ..
                })
            ),
            "{mismatched:?}"
        );
        assert!(!client.is_connected(&to));
        api_versions(&client, &to, PATIENT).await.expect("answer");
    });
    assert_eq!(*server.connections.lock().expect("lock"), 2);
}

#[test]
fn nothing_listening_is_a_connect_error_and_unknown_versions_are_not_sent() {
    run(|| async {
        let client = PeerClient::for_broker(1);
        let to = Endpoint::new("127.0.0.1", 1);
        let refused = api_versions(&client, &to, PATIENT).await;
        assert!(
            matches!(refused, Err(PeerError::Connect { .. })),
            "{refused:?}"
        );
        let unknown = client
            .call::<ApiVersionsRequest, ApiVersionsResponse>(
                &to,
                99,
                &ApiVersionsRequest::default(),
                PATIENT,
            )
            .await;
        assert!(
            matches!(
                unknown,
                Err(PeerError::UnsupportedVersion {
                    api_key: 18,
                    version: 99
                })
            ),
            "{unknown:?}"
        );
    });
}
