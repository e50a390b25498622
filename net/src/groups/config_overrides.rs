//! The coordinator's side of group configs: the broker's settings they are bounded by, and a
//! group's overrides applied to the settings its KIP-848 group runs with.

use crate::groups::config::GroupConfig;
use crate::groups::consumer_group::ConsumerGroupConfig;
use crate::model::group_configs::{BrokerGroupSettings, GroupConfigOverrides};

impl BrokerGroupSettings for GroupConfig {
    fn consumer_session_timeout_ms(&self) -> i32 {
        self.consumer_session_timeout_ms
    }

    fn consumer_heartbeat_interval_ms(&self) -> i32 {
        self.consumer_heartbeat_interval_ms
    }
}

impl GroupConfigOverrides {
    /// The group's own session timeout and heartbeat interval over the broker's settings.
    pub fn apply_to(&self, config: &mut ConsumerGroupConfig) {
        let int = |name: &str| self.get(name).and_then(|v| v.parse::<i32>().ok());
        if let Some(session) = int("consumer.session.timeout.ms") {
            config.session_timeout_ms = session;
        }
        if let Some(heartbeat) = int("consumer.heartbeat.interval.ms") {
            config.heartbeat_interval_ms = heartbeat;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::group_configs::GROUP_CONFIGS;

    #[test]
    fn table_is_sorted_and_defaults_are_valid() {
        let broker = GroupConfig::default();
        assert!(GROUP_CONFIGS.windows(2).all(|w| w[0].name < w[1].name));
        for spec in GROUP_CONFIGS {
            let mut overrides = GroupConfigOverrides::default();
            assert_eq!(
                overrides.set(spec.name, spec.default, &broker),
                Ok(()),
                "{}",
                spec.name
            );
        }
    }

    #[test]
    fn values_are_bounded_by_the_broker() {
        let broker = GroupConfig::default();
        let mut overrides = GroupConfigOverrides::default();
        assert_eq!(
            overrides
                .set("consumer.session.timeout.ms", "1000", &broker)
                .expect_err("refused")
                .0,
            "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."
        );
        assert_eq!(
            overrides.set("consumer.session.timeout.ms", "abc", &broker).expect_err("refused").0,
            "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"
        );
        assert_eq!(
            overrides
                .set("no.such", "1", &broker)
                .expect_err("refused")
                .0,
            "Unknown group config name: no.such"
        );
        assert!(overrides
            .set("streams.num.standby.replicas", "3", &broker)
            .is_err());
        assert!(overrides
            .set("streams.assignor.name", "foo", &broker)
            .is_err());
        assert!(overrides
            .set("errors.deadletterqueue.topic.name", "__dlq", &broker)
            .is_err());
        assert!(overrides
            .set("share.auto.offset.reset", "by_duration:PT1H", &broker)
            .is_ok());
        // A broker started with a shorter session timeout allows it for its groups too.
        let short = GroupConfig {
            consumer_session_timeout_ms: 6_000,
            consumer_heartbeat_interval_ms: 1_000,
            ..GroupConfig::default()
        };
        assert!(overrides
            .set("consumer.session.timeout.ms", "6000", &short)
            .is_ok());
        assert!(overrides
            .set("consumer.heartbeat.interval.ms", "1000", &short)
            .is_ok());
        overrides.check_combination(&short).expect("6000 > 1000");
        overrides
            .set("consumer.heartbeat.interval.ms", "6000", &short)
            .expect("in range");
        assert_eq!(
            overrides.check_combination(&short).expect_err("refused").0,
            "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
        );
    }

    #[test]
    fn overrides_reach_the_consumer_group_settings() {
        let broker = GroupConfig::default();
        let mut overrides = GroupConfigOverrides::default();
        overrides
            .set("consumer.session.timeout.ms", "50000", &broker)
            .expect("valid");
        overrides
            .set("consumer.heartbeat.interval.ms", "6000", &broker)
            .expect("valid");
        let mut config = broker.consumer();
        overrides.apply_to(&mut config);
        assert_eq!(
            (config.session_timeout_ms, config.heartbeat_interval_ms),
            (50_000, 6_000)
        );
    }
}
