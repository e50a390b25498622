//! The text forms of a UUID, and the one topic-id type.
//!
//! A topic id is [`kaas_cluster::ids::TopicId`]; `protocol::Uuid` is the wire's 16 bytes, and
//! the two convert with `From`. Its text form is Kafka's (22 characters of URL-safe base64,
//! as `assignment.json` and the cluster id), written by [`topic_id_text`];
//! [`parse_topic_id`] reads it and the 32 lowercase hex digits of files written before
//! (`__cluster/topics.json`). The group stores and classic member ids still use the hex form
//! ([`format_uuid`], [`parse_uuid`]).

use kaas_cluster::ids::TopicId;

use crate::protocol::Uuid;

impl From<TopicId> for Uuid {
    fn from(id: TopicId) -> Self {
        Uuid(id.0)
    }
}

impl From<Uuid> for TopicId {
    fn from(id: Uuid) -> Self {
        TopicId(id.0)
    }
}

/// Kafka's text form of a topic id (URL-safe base64, 22 characters).
pub fn topic_id_text(id: &Uuid) -> String {
    kaas_cluster::ids::url_safe_base64(&id.0)
}

/// A topic id in Kafka's text form, or in the 32 hex digits older files hold.
pub fn parse_topic_id(text: &str) -> Option<Uuid> {
    match TopicId::parse(text) {
        Ok(id) => Some(id.into()),
        Err(_) => parse_uuid(text),
    }
}

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

    #[test]
    fn topic_ids_read_in_both_forms_and_write_in_kafkas() {
        let id = random_uuid();
        let text = topic_id_text(&id);
        assert_eq!(text.len(), 22);
        assert_eq!(parse_topic_id(&text), Some(id));
        assert_eq!(parse_topic_id(&format_uuid(&id)), Some(id));
        assert_eq!(parse_topic_id("not an id"), None);
        assert_eq!(
            topic_id_text(&Uuid([
                0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54,
                0x32, 0x10
            ])),
            "ASNFZ4mrze_-3LqYdlQyEA"
        );
    }
}
