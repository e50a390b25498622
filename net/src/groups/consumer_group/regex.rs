//! Topic-subscription patterns (`SubscribedTopicRegex`): RE2 syntax, as Kafka's RE2/J, and a
//! pattern must match the whole topic name. The `regex` crate matches in linear time and
//! compiled patterns are size-limited, so a hostile pattern cannot stall the coordinator.

/// Longest pattern accepted.
const MAX_PATTERN: usize = 1024;
/// Memory a compiled pattern may take.
const MAX_COMPILED_BYTES: usize = 1 << 20;

/// A compiled pattern.
#[derive(Debug, Clone)]
pub struct Regex(regex::Regex);

impl Regex {
    /// Compiles `pattern`, or says why it cannot.
    pub fn new(pattern: &str) -> Result<Regex, String> {
        if pattern.len() > MAX_PATTERN {
            return Err("pattern too long".to_owned());
        }
        regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
            .size_limit(MAX_COMPILED_BYTES)
            .dfa_size_limit(MAX_COMPILED_BYTES)
            .build()
            .map(Regex)
            .map_err(|error| error.to_string())
    }

    /// Whether the whole of `text` matches.
    pub fn is_match(&self, text: &str) -> bool {
        self.0.is_match(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_whole_names_only() {
        let regex = Regex::new("orders-.*|payments").expect("valid");
        assert!(regex.is_match("orders-eu"));
        assert!(regex.is_match("payments"));
        assert!(!regex.is_match("old-payments"));
        assert!(!regex.is_match("payments-2"));
    }

    #[test]
    fn rejects_invalid_and_oversized_patterns() {
        assert!(Regex::new("(unclosed").is_err());
        assert!(Regex::new(&"a".repeat(MAX_PATTERN + 1)).is_err());
        assert!(
            Regex::new("(a{1000}){1000}").is_err(),
            "compiled size is bounded"
        );
    }
}
