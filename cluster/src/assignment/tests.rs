//! Parsing and checking `assignment.json`: the documented example, and one refused file per
//! rule.

use super::*;

const EXAMPLE: &str = r#"{"format": 1, "controller_epoch": 3, "assignment_version": 17,
 "brokers": [{"id": 0, "host": "127.0.0.1", "port": 19092},
             {"id": 1, "host": "127.0.0.2", "port": 19092}],
 "topics": {"orders": {"id": "ASNFZ4mrze_-3LqYdlQyEA", "partitions": 2,
                       "configs": {"retention.ms": "86400000"}}},
 "partitions": {"orders": [{"leader": 0, "leader_epoch": 3}, {"leader": 1, "leader_epoch": 3}]},
 "consumerGroups": {"billing": 1}}"#;

fn example() -> serde_json::Value {
    serde_json::from_str(EXAMPLE).expect("example is JSON")
}

fn parse(value: &serde_json::Value) -> Result<Assignment, AssignmentError> {
    Assignment::from_json(value.to_string().as_bytes())
}

fn orders() -> TopicName {
    TopicName::new("orders").expect("legal name")
}

#[test]
fn example_parses_into_what_it_says() {
    let assignment = Assignment::from_json(EXAMPLE.as_bytes()).expect("valid");
    assert_eq!(assignment.controller_epoch(), ControllerEpoch(3));
    assert_eq!(assignment.version(), AssignmentVersion(17));
    assert_eq!(assignment.brokers().len(), 2);
    assert_eq!(assignment.brokers()[&BrokerId(1)].host, "127.0.0.2");
    let topic = &assignment.topics()[&orders()];
    assert_eq!(topic.id.to_string(), "ASNFZ4mrze_-3LqYdlQyEA");
    assert_eq!(topic.configs["retention.ms"], "86400000");
    assert_eq!(
        assignment.leader(&TopicPartition::new(orders(), 1)),
        Some(PartitionLeader {
            leader: BrokerId(1),
            leader_epoch: LeaderEpoch(3)
        })
    );
    assert_eq!(assignment.leader(&TopicPartition::new(orders(), 2)), None);
    assert_eq!(assignment.leader(&TopicPartition::new(orders(), -1)), None);
    assert_eq!(assignment.groups()[&GroupId::new("billing")], BrokerId(1));
    assert_eq!(assignment.partitions().count(), 2);
}

#[test]
fn serialisation_round_trips_and_keeps_the_contract_names() {
    let assignment = Assignment::from_json(EXAMPLE.as_bytes()).expect("valid");
    let bytes = assignment.to_json();
    assert_eq!(Assignment::from_json(&bytes), Ok(assignment));
    let written: serde_json::Value = serde_json::from_slice(&bytes).expect("JSON");
    assert_eq!(written, example());
}

#[test]
fn unknown_fields_are_ignored_and_optional_maps_may_be_omitted() {
    let mut value = example();
    value["balancer"] = serde_json::json!({"moves": 3});
    value["topics"]["orders"]["future"] = serde_json::json!(true);
    assert!(parse(&value).is_ok());
    value
        .as_object_mut()
        .expect("object")
        .remove("consumerGroups");
    value["topics"]["orders"]
        .as_object_mut()
        .expect("object")
        .remove("configs");
    let assignment = parse(&value).expect("valid without the optional maps");
    assert!(assignment.groups().is_empty());
    assert!(assignment.topics()[&orders()].configs.is_empty());
}

#[test]
fn torn_files_are_refused_as_truncated() {
    let bytes = Assignment::from_json(EXAMPLE.as_bytes())
        .expect("valid")
        .to_json();
    // The last byte is the newline; dropping only it leaves the whole document.
    for cut in 0..bytes.len() - 1 {
        let error = Assignment::from_json(&bytes[..cut]).expect_err("torn");
        assert!(
            matches!(error, AssignmentError::Truncated(_)),
            "cut at {cut}: {error}"
        );
    }
}

#[test]
fn garbage_is_refused() {
    for bytes in [
        &b"\xff\xfe"[..],
        b"not json",
        b"{} {}",
        b"[]",
        b"{\"format\": 1} trailing",
    ] {
        assert!(matches!(
            Assignment::from_json(bytes),
            Err(AssignmentError::Syntax(_) | AssignmentError::Shape(_))
        ));
    }
}

/// Edits the example with `edit` and expects it refused with an error `check` accepts.
fn refused(edit: impl FnOnce(&mut serde_json::Value), check: impl Fn(&AssignmentError) -> bool) {
    let mut value = example();
    edit(&mut value);
    let error = parse(&value).expect_err("inconsistent file accepted");
    assert!(check(&error), "unexpected error: {error}");
}

#[test]
fn every_rule_is_checked() {
    use serde_json::json;
    refused(
        |v| v["format"] = json!(2),
        |e| *e == AssignmentError::UnknownFormat(2),
    );
    refused(
        |v| v["controller_epoch"] = json!(-1),
        |e| matches!(e, AssignmentError::Shape(_)),
    );
    refused(
        |v| v["assignment_version"] = json!("17"),
        |e| matches!(e, AssignmentError::Shape(_)),
    );
    refused(
        |v| {
            v.as_object_mut().expect("object").remove("partitions");
        },
        |e| matches!(e, AssignmentError::Shape(m) if m.contains("partitions")),
    );
    refused(
        |v| v["brokers"][1]["id"] = json!(0),
        |e| *e == AssignmentError::DuplicateBroker(BrokerId(0)),
    );
    refused(
        |v| v["brokers"][1]["id"] = json!(-3),
        |e| *e == AssignmentError::NegativeBrokerId(-3),
    );
    refused(
        |v| v["brokers"][0]["host"] = json!(""),
        |e| {
            matches!(
                e,
                AssignmentError::BadEndpoint {
                    broker: BrokerId(0),
                    ..
                }
            )
        },
    );
    refused(
        |v| v["brokers"][0]["port"] = json!(0),
        |e| {
            matches!(
                e,
                AssignmentError::BadEndpoint {
                    broker: BrokerId(0),
                    ..
                }
            )
        },
    );
    refused(
        |v| v["brokers"][0]["port"] = json!(70000),
        |e| matches!(e, AssignmentError::Shape(_)),
    );
    refused(
        |v| {
            let topic = v["topics"]["orders"].take();
            v["topics"] = json!({"..": topic});
            v["partitions"] = json!({"..": v["partitions"]["orders"].take()});
        },
        |e| matches!(e, AssignmentError::BadTopicName { name, .. } if name == ".."),
    );
    refused(
        |v| v["topics"]["orders"]["id"] = json!("orders"),
        |e| matches!(e, AssignmentError::BadTopicId { topic, .. } if topic == "orders"),
    );
    refused(
        |v| {
            v["topics"]["more"] = v["topics"]["orders"].clone();
            v["partitions"]["more"] = v["partitions"]["orders"].clone();
        },
        |e| matches!(e, AssignmentError::DuplicateTopicId { .. }),
    );
    refused(
        |v| v["topics"]["orders"]["partitions"] = json!(0),
        |e| matches!(e, AssignmentError::BadPartitionCount { count: 0, .. }),
    );
    refused(
        |v| v["topics"]["orders"]["partitions"] = json!(3),
        |e| {
            matches!(
                e,
                AssignmentError::PartitionCountMismatch {
                    declared: 3,
                    listed: 2,
                    ..
                }
            )
        },
    );
    refused(
        |v| {
            v["partitions"]["orders"]
                .as_array_mut()
                .expect("array")
                .pop();
        },
        |e| {
            matches!(
                e,
                AssignmentError::PartitionCountMismatch {
                    declared: 2,
                    listed: 1,
                    ..
                }
            )
        },
    );
    refused(
        |v| {
            v["partitions"]
                .as_object_mut()
                .expect("object")
                .remove("orders");
        },
        |e| *e == AssignmentError::TopicWithoutLeaders("orders".into()),
    );
    refused(
        |v| v["partitions"]["ghost"] = json!([{"leader": 0, "leader_epoch": 0}]),
        |e| *e == AssignmentError::LeadersOfUnknownTopic("ghost".into()),
    );
    refused(
        |v| v["partitions"]["orders"][1]["leader"] = json!(7),
        |e| {
            matches!(
                e,
                AssignmentError::UnknownLeader {
                    partition: 1,
                    leader: 7,
                    ..
                }
            )
        },
    );
    refused(
        |v| v["partitions"]["orders"][0]["leader_epoch"] = json!(-1),
        |e| {
            matches!(
                e,
                AssignmentError::NegativeLeaderEpoch {
                    partition: 0,
                    epoch: -1,
                    ..
                }
            )
        },
    );
    refused(
        |v| v["consumerGroups"]["billing"] = json!(9),
        |e| matches!(e, AssignmentError::UnknownGroupBroker { broker: 9, .. }),
    );
}

#[test]
fn duplicate_keys_are_refused() {
    let doubled_topic = EXAMPLE.replace(
        "\"topics\": {",
        "\"topics\": {\"orders\": {\"id\": \"ASNFZ4mrze_-3LqYdlQyEA\", \"partitions\": 2},",
    );
    let doubled_group = EXAMPLE.replace("{\"billing\": 1}", "{\"billing\": 1, \"billing\": 0}");
    let doubled_config = EXAMPLE.replace(
        "{\"retention.ms\": \"86400000\"}",
        "{\"retention.ms\": \"1\", \"retention.ms\": \"2\"}",
    );
    for text in [doubled_topic, doubled_group, doubled_config] {
        assert!(
            matches!(
                Assignment::from_json(text.as_bytes()),
                Err(AssignmentError::Shape(m)) if m.contains("appears twice")
            ),
            "{text}"
        );
    }
}
