//! Every error code we define has Kafka's number and name (as the `kafka-protocol` crate,
//! generated from Kafka's `Errors` list, has them).

use kaas_net::protocol::ErrorCode;
use kafka_protocol::error::ResponseError;

#[test]
fn error_codes_match_kafka() {
    for code in ErrorCode::ALL {
        if *code == ErrorCode::None {
            assert_eq!(code.code(), 0);
            continue;
        }
        let theirs = ResponseError::try_from_code(code.code())
            .unwrap_or_else(|| panic!("{code:?} ({}) unknown to Kafka", code.code()));
        assert_eq!(
            format!("{theirs:?}"),
            format!("{code:?}"),
            "code {}",
            code.code()
        );
        let upper: String = format!("{code:?}")
            .chars()
            .flat_map(|c| {
                let sep = c.is_uppercase().then_some('_');
                sep.into_iter().chain(c.to_uppercase())
            })
            .collect();
        assert_eq!(upper.trim_start_matches('_'), code.name());
    }
}
