//! A scripted stand-in for a peer broker, for tests: a thread accepting connections on
//! 127.0.0.1, reading request frames one at a time and answering each with what the script
//! returns for it, or closing the connection when the script returns nothing.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::protocol::{decode_request, Request, RequestHeader};

/// What the script is given: the request's number (from 0, across connections), its
/// connection's number (from 0), header and body. It returns the answer frame's chunks, or
/// `None` to close the connection unanswered.
pub(crate) type Script =
    dyn Fn(usize, usize, &RequestHeader, Request) -> Option<Vec<Bytes>> + Send + 'static;

/// A running scripted server.
pub(crate) struct ScriptedServer {
    /// The port it listens on.
    pub port: u16,
    /// The headers of the requests it read, in order.
    pub headers: Arc<Mutex<Vec<RequestHeader>>>,
    /// How many connections it accepted.
    pub connections: Arc<Mutex<usize>>,
}

/// Starts a server answering with `script`. Its thread lives as long as the test process.
pub(crate) fn start(script: Box<Script>) -> ScriptedServer {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let headers = Arc::new(Mutex::new(Vec::new()));
    let connections = Arc::new(Mutex::new(0));
    let (seen, accepted) = (headers.clone(), connections.clone());
    std::thread::spawn(move || {
        let mut requests = 0;
        for (connection, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { continue };
            *accepted.lock().expect("lock") += 1;
            loop {
                let mut size = [0u8; 4];
                if stream.read_exact(&mut size).is_err() {
                    break;
                }
                let mut frame = vec![0u8; i32::from_be_bytes(size) as usize];
                if stream.read_exact(&mut frame).is_err() {
                    break;
                }
                let (header, request) = decode_request(Bytes::from(frame)).expect("a request");
                seen.lock().expect("lock").push(header.clone());
                let answer = script(requests, connection, &header, request);
                requests += 1;
                let Some(chunks) = answer else { break };
                for chunk in chunks {
                    if stream.write_all(&chunk).is_err() {
                        break;
                    }
                }
            }
        }
    });
    ScriptedServer {
        port,
        headers,
        connections,
    }
}
