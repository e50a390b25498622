//! Topic names, validated by Kafka's rules: 1 to 249 characters from `[a-zA-Z0-9._-]`, and
//! neither `.` nor `..` (the names would mean the current or parent directory on disk).

use std::fmt;
use std::sync::Arc;

use kaas_volume::topic_name::validate;
pub use kaas_volume::topic_name::{TopicNameError, MAX_TOPIC_NAME_LEN};

/// A topic name that passed Kafka's rules; cheap to clone.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicName(Arc<str>);

impl TopicName {
    /// `name` if Kafka would accept it as a topic name.
    pub fn new(name: &str) -> Result<Self, TopicNameError> {
        validate(name)?;
        Ok(TopicName(Arc::from(name)))
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The shared string, for callers that keep `Arc<str>` names.
    pub fn as_arc(&self) -> &Arc<str> {
        &self.0
    }
}

impl fmt::Display for TopicName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for TopicName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::borrow::Borrow<str> for TopicName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_rules() {
        for good in ["orders", "a", "A-b_c.9", "..a", "...", &"x".repeat(249)] {
            assert!(TopicName::new(good).is_ok(), "{good}");
        }
        assert_eq!(TopicName::new(""), Err(TopicNameError::Empty));
        assert_eq!(TopicName::new("."), Err(TopicNameError::DotName));
        assert_eq!(TopicName::new(".."), Err(TopicNameError::DotName));
        assert_eq!(
            TopicName::new(&"x".repeat(250)),
            Err(TopicNameError::TooLong(250))
        );
        assert_eq!(
            TopicName::new("a/b"),
            Err(TopicNameError::IllegalCharacter('/'))
        );
        assert_eq!(
            TopicName::new("café"),
            Err(TopicNameError::IllegalCharacter('é'))
        );
        assert_eq!(
            TopicName::new("a b"),
            Err(TopicNameError::IllegalCharacter(' '))
        );
        // Kafka checks the length before the characters, counting UTF-16 units.
        assert_eq!(
            TopicName::new(&format!("{}/", "x".repeat(249))),
            Err(TopicNameError::TooLong(250))
        );
        assert_eq!(
            TopicName::new(&"é".repeat(200)),
            Err(TopicNameError::IllegalCharacter('é'))
        );
    }
}
