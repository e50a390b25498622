//! Feeds arbitrary bytes to the request decoder: it must return, never panic or abort.
//! A decoded request must also re-encode and decode to the same value.

#![no_main]

use bytes::{Bytes, BytesMut};
use kaas_net::protocol::{decode_request, Request};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let frame = Bytes::copy_from_slice(data);
    if let Ok((header, request)) = decode_request(frame) {
        let mut again = BytesMut::new();
        for chunk in request.encode_frame(&header) {
            again.extend_from_slice(&chunk);
        }
        let again = again.freeze().slice(4..);
        let (header2, request2): (_, Request) =
            decode_request(again).expect("a re-encoded request decodes");
        assert_eq!(header2, header);
        assert_eq!(request2, request);
    }
});
