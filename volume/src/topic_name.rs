//! Kafka's rule for topic names: 1 to 249 characters from `[a-zA-Z0-9._-]`, and neither `.`
//! nor `..`. A topic name becomes a directory name on the volume (`topics/<topic>/...`), so
//! the rule is also what keeps a path inside the data directory; the engine and the cluster
//! crate both check names with it.

/// The longest topic name Kafka accepts (so that `<name>-<partition>` fits a 255-byte file name).
pub const MAX_TOPIC_NAME_LEN: usize = 249;

/// Why a string is not a legal topic name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TopicNameError {
    /// The name is empty.
    #[error("topic name is empty")]
    Empty,
    /// The name is longer than [`MAX_TOPIC_NAME_LEN`].
    #[error("topic name is {0} characters long, more than 249")]
    TooLong(usize),
    /// The name is `.` or `..`.
    #[error("topic name cannot be \".\" or \"..\"")]
    DotName,
    /// The name holds a character outside `[a-zA-Z0-9._-]`.
    #[error("topic name holds {0:?}; only ASCII letters, digits, '.', '_' and '-' are legal")]
    IllegalCharacter(char),
}

/// `Ok` if Kafka would accept `name` as a topic name, else the first rule it breaks.
pub fn validate(name: &str) -> Result<(), TopicNameError> {
    // Kafka's `Topic.validate` order: empty, `.`/`..`, length (in UTF-16 units, as Java's
    // `String.length()`), then characters.
    if name.is_empty() {
        return Err(TopicNameError::Empty);
    }
    if name == "." || name == ".." {
        return Err(TopicNameError::DotName);
    }
    let length = name.encode_utf16().count();
    if length > MAX_TOPIC_NAME_LEN {
        return Err(TopicNameError::TooLong(length));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(TopicNameError::IllegalCharacter(bad));
    }
    Ok(())
}

/// Whether `name` is a legal topic name.
pub fn is_legal(name: &str) -> bool {
    validate(name).is_ok()
}
