//! Topic ids: Kafka's 16-byte UUIDs, written as Kafka prints them (`Uuid.toString()`): the 16
//! bytes big-endian in URL-safe base64 without padding, 22 characters.
//!
//! Parsing is stricter than Kafka's `Uuid.fromString`, which also accepts padding and
//! non-canonical last characters (`…AB` decodes like `…AA`): here exactly the 22-character
//! canonical form is accepted, so a parsed id prints back to the same text. The two ids Kafka
//! reserves are refused as topic ids: all zeros (Kafka's "no id") and `0…01` (the metadata
//! topic's id).

use std::fmt;

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Characters in a topic id's text form.
pub const TOPIC_ID_TEXT_LEN: usize = 22;

/// A topic id (a 128-bit UUID, big-endian bytes as on the wire).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicId(pub [u8; 16]);

/// Why a string is not a topic id.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TopicIdError {
    /// Not 22 characters long.
    #[error("a topic id is 22 characters of URL-safe base64, this one has {0}")]
    Length(usize),
    /// A character outside the URL-safe base64 alphabet.
    #[error("{0:?} is not a URL-safe base64 character")]
    Character(char),
    /// The last character carries bits beyond the 128 of a UUID.
    #[error("not the canonical form of a 16-byte id (the last character has stray bits)")]
    NotCanonical,
    /// One of the two ids Kafka reserves.
    #[error("{0} is reserved by Kafka and cannot name a topic")]
    Reserved(TopicId),
}

impl TopicId {
    /// Kafka's "no id" (all zeros).
    pub const ZERO: TopicId = TopicId([0; 16]);
    /// The id Kafka reserves for its metadata topic (`0…01`).
    pub const METADATA: TopicId = TopicId([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);

    /// Parses the 22-character text form; refuses the reserved ids.
    pub fn parse(text: &str) -> Result<Self, TopicIdError> {
        let length = text.chars().count();
        if length != TOPIC_ID_TEXT_LEN {
            return Err(TopicIdError::Length(length));
        }
        let mut bits: u128 = 0;
        for (index, character) in text.chars().enumerate() {
            let value = sextet(character).ok_or(TopicIdError::Character(character))?;
            if index + 1 < TOPIC_ID_TEXT_LEN {
                bits = (bits << 6) | u128::from(value);
            } else {
                // 21 full sextets hold 126 bits; the last character adds the low 2.
                if value & 0x0f != 0 {
                    return Err(TopicIdError::NotCanonical);
                }
                bits = (bits << 2) | u128::from(value >> 4);
            }
        }
        let id = TopicId(bits.to_be_bytes());
        if id == TopicId::ZERO || id == TopicId::METADATA {
            return Err(TopicIdError::Reserved(id));
        }
        Ok(id)
    }
}

fn sextet(character: char) -> Option<u8> {
    let byte = u8::try_from(character).ok()?;
    ALPHABET.iter().position(|c| *c == byte).map(|p| p as u8)
}

impl fmt::Display for TopicId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&url_safe_base64(&self.0))
    }
}

/// Kafka's text form of 16 bytes (`Uuid.toString()`): big-endian, URL-safe base64 without
/// padding, 22 characters. Topic ids, the cluster id and KIP-848 member ids are written so.
pub fn url_safe_base64(bytes: &[u8; 16]) -> String {
    let bits = u128::from_be_bytes(*bytes);
    (0..TOPIC_ID_TEXT_LEN)
        .map(|index| {
            let value = if index + 1 < TOPIC_ID_TEXT_LEN {
                (bits >> (122 - 6 * index)) & 63
            } else {
                // 21 full sextets hold 126 bits; the last character carries the low 2.
                (bits & 3) << 4
            };
            char::from(ALPHABET[value as usize])
        })
        .collect()
}

/// A new cluster id from 16 random bytes, in Kafka's form (`Uuid.randomUuid().toString()`).
pub fn cluster_id_of(random: [u8; 16]) -> String {
    url_safe_base64(&random)
}

impl fmt::Debug for TopicId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // Printed by Kafka 4.4's `org.apache.kafka.common.Uuid.toString()`.
    #[test]
    fn matches_kafka_text_form() {
        let id = TopicId(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210_u128.to_be_bytes());
        assert_eq!(id.to_string(), "ASNFZ4mrze_-3LqYdlQyEA");
        assert_eq!(TopicId::parse("ASNFZ4mrze_-3LqYdlQyEA"), Ok(id));
        assert_eq!(TopicId([0xff; 16]).to_string(), "_____________________w");
        assert_eq!(TopicId::METADATA.to_string(), "AAAAAAAAAAAAAAAAAAAAAQ");
        assert_eq!(TopicId::ZERO.to_string(), "AAAAAAAAAAAAAAAAAAAAAA");
    }

    #[test]
    fn refuses_bad_text() {
        assert_eq!(TopicId::parse("AAAA"), Err(TopicIdError::Length(4)));
        assert_eq!(
            TopicId::parse("ASNFZ4mrze_-3LqYdlQyEA=="),
            Err(TopicIdError::Length(24))
        );
        assert_eq!(
            TopicId::parse("ASNFZ4mrze_-3LqYdlQy+A"),
            Err(TopicIdError::Character('+'))
        );
        assert_eq!(
            TopicId::parse("ASNFZ4mrze_-3LqYdlQyEB"),
            Err(TopicIdError::NotCanonical)
        );
        assert!(matches!(
            TopicId::parse("AAAAAAAAAAAAAAAAAAAAAA"),
            Err(TopicIdError::Reserved(_))
        ));
        assert!(matches!(
            TopicId::parse("AAAAAAAAAAAAAAAAAAAAAQ"),
            Err(TopicIdError::Reserved(_))
        ));
        // Multi-byte characters never panic the length or character checks.
        assert_eq!(
            TopicId::parse("AAAAAAAAAAAAAAAAAAAAAé"),
            Err(TopicIdError::Character('é'))
        );
        assert_eq!(TopicId::parse("éé"), Err(TopicIdError::Length(2)));
    }

    proptest! {
        #[test]
        fn text_round_trips(bytes in any::<[u8; 16]>()) {
            let id = TopicId(bytes);
            let text = id.to_string();
            prop_assert_eq!(text.len(), 22);
            if id != TopicId::ZERO && id != TopicId::METADATA {
                prop_assert_eq!(TopicId::parse(&text), Ok(id));
            }
        }
    }
}
