//! librdkafka client settings for producers, consumers and the admin client.

use rdkafka::ClientConfig;

/// A `key=value` pair from the command line.
pub fn parse_key_value(text: &str) -> Result<(String, String), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| format!("expected key=value, got {text:?}"))?;
    if key.is_empty() {
        return Err(format!("empty key in {text:?}"));
    }
    Ok((key.to_string(), value.to_string()))
}

/// The consumers' `fetch.queue.backoff.ms` (see [`ClientSettings::consumer`]).
pub const FETCH_QUEUE_BACKOFF_MS: &str = "10";

/// Settings every client of a run shares.
#[derive(Clone, Debug)]
pub struct ClientSettings {
    pub bootstrap: String,
    pub acks: String,
    pub compression: String,
    pub producer_props: Vec<(String, String)>,
    pub consumer_props: Vec<(String, String)>,
}

fn base(bootstrap: &str, client_id: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("client.id", client_id)
        // Benchmarks run against a single local broker: no address-family guessing.
        .set("broker.address.family", "v4");
    config
}

impl ClientSettings {
    /// A producer with librdkafka's defaults except acks and compression, then any
    /// `--producer-prop` overrides.
    pub fn producer(&self, client_id: &str) -> ClientConfig {
        let mut config = base(&self.bootstrap, client_id);
        config
            .set("acks", &self.acks)
            .set("compression.type", &self.compression);
        for (key, value) in &self.producer_props {
            config.set(key, value);
        }
        config
    }

    /// A consumer that is assigned partitions directly (no group membership, no commits),
    /// then any `--consumer-prop` overrides. librdkafka needs a `group.id` for `assign`, but
    /// without subscribe or commits it never joins the group.
    ///
    /// `fetch.queue.backoff.ms` is [`FETCH_QUEUE_BACKOFF_MS`] instead of librdkafka's 1000:
    /// once a partition's local queue passes `queued.min.messages` (100,000 records: 10 MB
    /// of 100 B records), librdkafka postpones that partition's next fetch by this long. A
    /// broker that answers faster than the application consumes would otherwise see the
    /// consumer idle for a second at a time, and the faster broker would measure slower
    /// (librdkafka issue 2879).
    pub fn consumer(&self, client_id: &str) -> ClientConfig {
        let mut config = base(&self.bootstrap, client_id);
        config
            .set("group.id", format!("kaas-bench-{}", std::process::id()))
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "false")
            .set("fetch.queue.backoff.ms", FETCH_QUEUE_BACKOFF_MS);
        for (key, value) in &self.consumer_props {
            config.set(key, value);
        }
        config
    }

    /// A consumer that joins `group_id` through `subscribe`: no offset commits, then
    /// `group_props` (protocol, assignor, timeouts), then any `--consumer-prop` overrides.
    pub fn group_member(
        &self,
        client_id: &str,
        group_id: &str,
        group_props: &[(String, String)],
    ) -> ClientConfig {
        let mut config = base(&self.bootstrap, client_id);
        config
            .set("group.id", group_id)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "false");
        for (key, value) in group_props.iter().chain(&self.consumer_props) {
            config.set(key, value);
        }
        config
    }

    /// An admin client.
    pub fn admin(&self) -> ClientConfig {
        base(&self.bootstrap, "kaas-bench-admin")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_values_split_on_the_first_equals() {
        assert_eq!(
            parse_key_value("linger.ms=5"),
            Ok(("linger.ms".to_string(), "5".to_string()))
        );
        assert_eq!(
            parse_key_value("a=b=c"),
            Ok(("a".to_string(), "b=c".to_string()))
        );
        assert!(parse_key_value("novalue").is_err());
        assert!(parse_key_value("=x").is_err());
    }
}
