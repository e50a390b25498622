//! The text forms of a UUID (topic ids, member ids): 32 lowercase hex digits, as
//! `__cluster/topics.json` and the group stores write them.

use crate::protocol::Uuid;

/// Hex form of a UUID.
pub fn format_uuid(id: &Uuid) -> String {
    id.0.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses 32 hex digits.
pub fn parse_uuid(text: &str) -> Option<Uuid> {
    if text.len() != 32 || !text.is_ascii() {
        return None;
    }
    let mut bytes = [0u8; 16];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[i * 2..i * 2 + 2], 16).ok()?;
    }
    Some(Uuid(bytes))
}

/// A new random topic id (never the nil id Kafka reserves).
pub fn random_uuid() -> Uuid {
    loop {
        let id = Uuid(rand::random());
        if id != Uuid::NIL {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_hex_round_trip() {
        let id = random_uuid();
        assert_eq!(parse_uuid(&format_uuid(&id)), Some(id));
        assert_eq!(parse_uuid("zz"), None);
        assert_eq!(parse_uuid(&"g".repeat(32)), None);
    }
}
