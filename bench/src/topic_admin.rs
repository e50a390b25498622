//! Creating and deleting the topics a run writes to.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::util::Timeout;

use crate::client_config::ClientSettings;

/// How long to wait for a topic's partitions to all have a leader after creating it.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// Admin operations against one broker.
pub struct TopicAdmin {
    client: AdminClient<DefaultClientContext>,
}

impl TopicAdmin {
    pub fn connect(settings: &ClientSettings) -> anyhow::Result<Self> {
        let client = settings
            .admin()
            .create()
            .context("creating the admin client")?;
        Ok(TopicAdmin { client })
    }

    fn options() -> AdminOptions {
        AdminOptions::new()
            .request_timeout(Some(Timeout::After(Duration::from_secs(60))))
            .operation_timeout(Some(Timeout::After(Duration::from_secs(60))))
    }

    /// Creates `name` with `partitions` partitions (replication factor 1) and `configs`,
    /// then waits until every partition has a leader.
    pub fn create(
        &self,
        name: &str,
        partitions: i32,
        configs: &[(String, String)],
    ) -> anyhow::Result<()> {
        let mut topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
        for (key, value) in configs {
            topic = topic.set(key, value);
        }
        let results =
            futures_executor::block_on(self.client.create_topics(&[topic], &Self::options()))
                .context("CreateTopics request")?;
        for result in results {
            if let Err((topic, code)) = result {
                bail!("creating topic {topic}: {code}");
            }
        }
        self.wait_ready(name, partitions)
    }

    fn wait_ready(&self, name: &str, partitions: i32) -> anyhow::Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut last_problem = String::from("no metadata yet");
        while Instant::now() < deadline {
            match self
                .client
                .inner()
                .fetch_metadata(Some(name), Duration::from_secs(10))
            {
                Ok(metadata) => {
                    let ready = metadata
                        .topics()
                        .iter()
                        .find(|topic| topic.name() == name)
                        .map(|topic| {
                            topic.error().is_none()
                                && topic.partitions().len() == partitions as usize
                                && topic
                                    .partitions()
                                    .iter()
                                    .all(|p| p.leader() >= 0 && p.error().is_none())
                        });
                    match ready {
                        Some(true) => return Ok(()),
                        _ => last_problem = "partitions without a leader".into(),
                    }
                }
                Err(error) => last_problem = error.to_string(),
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        bail!("topic {name} not ready after {READY_TIMEOUT:?}: {last_problem}")
    }

    /// Deletes `name`; a topic that does not exist is not an error.
    pub fn delete(&self, name: &str) -> anyhow::Result<()> {
        let results =
            futures_executor::block_on(self.client.delete_topics(&[name], &Self::options()))
                .context("DeleteTopics request")?;
        for result in results {
            match result {
                Ok(_) => {}
                Err((_, RDKafkaErrorCode::UnknownTopicOrPartition)) => {}
                Err((topic, code)) => bail!("deleting topic {topic}: {code}"),
            }
        }
        Ok(())
    }

    /// The high watermark (next offset) of every partition of `name`. A broker may briefly
    /// answer NOT_LEADER (e.g. while it is busy with many partitions); each lookup is tried
    /// for up to 30 s.
    pub fn end_offsets(&self, name: &str, partitions: i32) -> anyhow::Result<Vec<i64>> {
        (0..partitions)
            .map(|partition| {
                let deadline = Instant::now() + Duration::from_secs(30);
                loop {
                    match self.client.inner().fetch_watermarks(
                        name,
                        partition,
                        Duration::from_secs(10),
                    ) {
                        Ok((_, high)) => return Ok(high),
                        Err(_) if Instant::now() < deadline => {
                            std::thread::sleep(Duration::from_millis(200));
                        }
                        Err(error) => {
                            return Err(error)
                                .with_context(|| format!("end offset of {name}-{partition}"))
                        }
                    }
                }
            })
            .collect()
    }
}
