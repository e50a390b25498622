//! One test per rule; each names the Kafka 4.4 behaviour it follows (`TransactionCoordinator`,
//! `TransactionStateManager`, `TransactionMetadata`).

use std::collections::BTreeSet;

use bytes::Bytes;

use super::*;
use crate::transactions::log_format::{decode_value, encode_key, encode_value};
use crate::transactions::partition_for;

const ID: &str = "my-txn";

/// A coordinator for `ID`'s partition, with every append written at once unless a test
/// says otherwise, and the records it wrote kept for reloads.
struct Harness {
    coordinator: TransactionCoordinator,
    now: i64,
    next_request: u64,
    next_producer_id: i64,
    log: Vec<(Bytes, Option<Bytes>)>,
}

#[derive(Debug, Default)]
struct Settled {
    answers: Vec<Answer>,
    markers: Vec<TxnMarkers>,
}

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

impl Harness {
    fn new() -> Harness {
        Harness::with_config(CoordinatorConfig::default())
    }

    fn with_config(config: CoordinatorConfig) -> Harness {
        Harness {
            coordinator: TransactionCoordinator::new(partition_for(ID), 3, config, 0),
            now: 1_000,
            next_request: 0,
            next_producer_id: 1000,
            log: Vec::new(),
        }
    }

    fn request(&mut self) -> RequestId {
        self.next_request += 1;
        RequestId(self.next_request)
    }

    /// Writes every append (recording it) until nothing is left, collecting answers and
    /// markers.
    fn settle(&mut self, mut actions: Actions) -> Settled {
        let mut settled = Settled::default();
        loop {
            settled
                .answers
                .extend(actions.answers.drain(..).map(|(_, answer)| answer));
            settled.markers.append(&mut actions.markers);
            let Some(append) = actions.appends.first().cloned() else {
                return settled;
            };
            actions.appends.remove(0);
            self.record(&append);
            let more = self
                .coordinator
                .append_completed(append.write_id, Ok(()), self.now);
            actions.merge(more);
        }
    }

    fn record(&mut self, append: &LogAppend) {
        let key = Bytes::from(append.key_bytes().expect("key encodes"));
        let value = append
            .value_bytes()
            .expect("value encodes")
            .map(Bytes::from);
        self.log.push((key, value));
    }

    fn supply_id(&mut self) -> i64 {
        self.next_producer_id += 1;
        self.coordinator.supply_producer_id(self.next_producer_id);
        self.next_producer_id
    }

    fn init_request(&mut self, id: &str, expected: Option<(i64, i16)>) -> InitProducerIdRequest {
        let _ = self;
        InitProducerIdRequest {
            transactional_id: id.to_owned(),
            transaction_timeout_ms: 60_000,
            expected: expected.map(|(producer_id, producer_epoch)| ProducerIdAndEpoch {
                producer_id,
                producer_epoch,
            }),
        }
    }

    fn init(&mut self, id: &str, expected: Option<(i64, i16)>) -> Settled {
        let request = self.request();
        let init = self.init_request(id, expected);
        let actions = match self.coordinator.init_producer_id(request, &init, self.now) {
            Ok(actions) => actions,
            Err(NeedsProducerId) => {
                self.supply_id();
                self.coordinator
                    .init_producer_id(request, &init, self.now)
                    .expect("an id was supplied")
            }
        };
        self.settle(actions)
    }

    /// Initializes `ID` and returns its producer id and epoch.
    fn initialized(&mut self) -> (i64, i16) {
        match self.init(ID, None).answers[..] {
            [Answer::InitProducerId {
                error: ErrorCode::None,
                producer_id,
                producer_epoch,
            }] => (producer_id, producer_epoch),
            ref other => panic!("init answered {other:?}"),
        }
    }

    fn add(
        &mut self,
        producer: (i64, i16),
        partitions: &[TopicPartition],
        version: TransactionVersion,
    ) -> ErrorCode {
        let request = self.request();
        let actions = self.coordinator.add_partitions(
            request,
            &AddPartitionsRequest {
                transactional_id: ID.to_owned(),
                producer_id: producer.0,
                producer_epoch: producer.1,
                partitions: partitions.iter().cloned().collect(),
                client_version: version,
            },
            self.now,
        );
        match self.settle(actions).answers[..] {
            [Answer::AddPartitions { error }] => error,
            ref other => panic!("add answered {other:?}"),
        }
    }

    fn end(
        &mut self,
        producer: (i64, i16),
        result: TransactionResult,
        version: TransactionVersion,
    ) -> (Answer, Vec<TxnMarkers>) {
        let request = self.request();
        let end = EndTxnRequest {
            transactional_id: ID.to_owned(),
            producer_id: producer.0,
            producer_epoch: producer.1,
            result,
            client_version: version,
        };
        let actions = match self.coordinator.end_txn(request, &end, self.now) {
            Ok(actions) => actions,
            Err(NeedsProducerId) => {
                self.supply_id();
                self.coordinator
                    .end_txn(request, &end, self.now)
                    .expect("an id was supplied")
            }
        };
        let settled = self.settle(actions);
        match settled.answers[..] {
            [answer] => (answer, settled.markers),
            ref other => panic!("end answered {other:?}"),
        }
    }

    fn markers_done(&mut self, markers: &[TxnMarkers]) {
        for marker in markers {
            let actions = self.coordinator.markers_written(
                &marker.transactional_id,
                marker.producer_id,
                marker.producer_epoch,
            );
            let settled = self.settle(actions);
            assert!(settled.answers.is_empty() && settled.markers.is_empty());
        }
    }

    fn state(&self) -> TransactionState {
        self.coordinator.transaction(ID).expect("known id").state
    }

    fn reload(&self) -> (TransactionCoordinator, Actions) {
        TransactionCoordinator::load(
            partition_for(ID),
            4,
            CoordinatorConfig::default(),
            self.log.clone(),
            self.now,
        )
        .expect("the records load")
    }
}

fn end_answer(error: ErrorCode, producer_id: i64, producer_epoch: i16) -> Answer {
    Answer::EndTxn {
        error,
        producer_id,
        producer_epoch,
    }
}

const V1: TransactionVersion = TransactionVersion::V0;
const V2: TransactionVersion = TransactionVersion::V2;
const COMMIT: TransactionResult = TransactionResult::Commit;
const ABORT: TransactionResult = TransactionResult::Abort;

// ---- InitProducerId ----

#[test]
fn init_of_a_new_id_asks_for_a_producer_id_and_answers_after_its_record() {
    let mut harness = Harness::new();
    let init = harness.init_request(ID, None);
    // handleInitProducerId: a new id takes a fresh producer id from the id manager.
    assert_eq!(
        harness.coordinator.init_producer_id(RequestId(1), &init, 5),
        Err(NeedsProducerId)
    );
    assert!(
        harness.coordinator.transaction(ID).is_none(),
        "nothing changed"
    );
    harness.coordinator.supply_producer_id(77);
    let actions = harness
        .coordinator
        .init_producer_id(RequestId(1), &init, 5)
        .expect("an id is spare");
    assert!(actions.answers.is_empty(), "answered only once written");
    let [append] = &actions.appends[..] else {
        panic!("one record: {actions:?}");
    };
    let value = append.value.as_ref().expect("not a tombstone");
    assert_eq!(
        (
            value.producer_id,
            value.producer_epoch,
            value.transaction_status
        ),
        (77, 0, TransactionState::Empty.id())
    );
    assert_eq!(value.version, 1, "a transaction.version 2 broker writes v1");
    let done = harness
        .coordinator
        .append_completed(append.write_id, Ok(()), 6);
    assert_eq!(
        done.answers,
        [(
            RequestId(1),
            Answer::InitProducerId {
                error: ErrorCode::None,
                producer_id: 77,
                producer_epoch: 0
            }
        )]
    );
}

#[test]
fn init_refuses_bad_timeouts_empty_ids_and_other_partitions_ids() {
    let mut harness = Harness::new();
    for (id, timeout, expected) in [
        // validateTransactionTimeoutMs: 0 < timeout <= transaction.max.timeout.ms.
        (ID, 900_001, ErrorCode::InvalidTransactionTimeout),
        (ID, 0, ErrorCode::InvalidTransactionTimeout),
        ("", 1_000, ErrorCode::InvalidRequest),
        // getTransactionState of a partition this broker does not lead.
        ("txn-7", 1_000, ErrorCode::NotCoordinator),
    ] {
        let request = harness.request();
        let init = InitProducerIdRequest {
            transactional_id: id.to_owned(),
            transaction_timeout_ms: timeout,
            expected: None,
        };
        let actions = harness
            .coordinator
            .init_producer_id(request, &init, 0)
            .expect("no id needed to refuse");
        assert_eq!(
            actions.answers,
            [(
                request,
                Answer::InitProducerId {
                    error: expected,
                    producer_id: -1,
                    producer_epoch: -1
                }
            )],
            "{id} {timeout}"
        );
        assert!(actions.appends.is_empty());
    }
    assert_eq!(partition_for("txn-7"), 16);
    // The maximum itself is allowed.
    let request = harness.request();
    let init = InitProducerIdRequest {
        transactional_id: ID.to_owned(),
        transaction_timeout_ms: 900_000,
        expected: None,
    };
    harness.supply_id();
    let actions = harness
        .coordinator
        .init_producer_id(request, &init, 0)
        .expect("id supplied");
    assert_eq!(actions.appends.len(), 1);
}

#[test]
fn init_again_bumps_the_epoch_and_kip_360_retries_get_the_same_one() {
    let mut harness = Harness::new();
    let (producer_id, epoch) = harness.initialized();
    let (_, bumped) = harness.initialized();
    assert_eq!(bumped, epoch + 1);
    // prepareIncrementProducerEpoch with the current epoch: bump, remember the last.
    let settled = harness.init(ID, Some((producer_id, bumped)));
    assert_eq!(
        settled.answers,
        [Answer::InitProducerId {
            error: ErrorCode::None,
            producer_id,
            producer_epoch: bumped + 1
        }]
    );
    // The same request again (its answer was lost): the epoch it was bumped from.
    let settled = harness.init(ID, Some((producer_id, bumped)));
    assert_eq!(
        settled.answers,
        [Answer::InitProducerId {
            error: ErrorCode::None,
            producer_id,
            producer_epoch: bumped + 1
        }]
    );
    // isValidProducerId: another producer id is fenced, as is an old epoch.
    for expected in [(producer_id + 5, bumped), (producer_id, epoch)] {
        let settled = harness.init(ID, Some(expected));
        assert_eq!(
            settled.answers,
            [Answer::InitProducerId {
                error: ErrorCode::ProducerFenced,
                producer_id: -1,
                producer_epoch: -1
            }],
            "{expected:?}"
        );
    }
}

#[test]
fn init_on_an_ongoing_transaction_aborts_it_fencing_the_producer() {
    let mut harness = Harness::new();
    let producer = harness.initialized();
    assert_eq!(harness.add(producer, &[tp("a", 0)], V1), ErrorCode::None);
    // prepareFenceProducerEpoch + endTransaction(ABORT): the client is told to retry.
    let settled = harness.init(ID, None);
    assert_eq!(
        settled.answers,
        [Answer::InitProducerId {
            error: ErrorCode::ConcurrentTransactions,
            producer_id: -1,
            producer_epoch: -1
        }]
    );
    let [markers] = &settled.markers[..] else {
        panic!("abort markers: {settled:?}");
    };
    assert_eq!(markers.result, ABORT);
    assert_eq!(
        markers.producer_epoch,
        producer.1 + 1,
        "the bumped epoch fences"
    );
    assert_eq!(markers.partitions, [tp("a", 0)]);
    assert_eq!(markers.coordinator_epoch, 3);
    assert_eq!(harness.state(), TransactionState::PrepareAbort);
    // Still completing: a retry waits.
    let settled = harness.init(ID, None);
    assert_eq!(
        settled.answers,
        [Answer::InitProducerId {
            error: ErrorCode::ConcurrentTransactions,
            producer_id: -1,
            producer_epoch: -1
        }]
    );
    harness.markers_done(&settled.markers);
    harness.markers_done(std::slice::from_ref(markers));
    assert_eq!(harness.state(), TransactionState::CompleteAbort);
    // The fenced producer can neither add nor end.
    assert_eq!(
        harness.add(producer, &[tp("b", 0)], V1),
        ErrorCode::ProducerFenced
    );
    assert_eq!(
        harness.end(producer, COMMIT, V1).0,
        end_answer(ErrorCode::ProducerFenced, -1, -1)
    );
    // The retry gets an epoch above the fence's.
    let (_, epoch) = harness.initialized();
    assert_eq!(epoch, producer.1 + 2);
}

#[test]
fn init_while_ending_is_concurrent_transactions() {
    let mut harness = Harness::new();
    let producer = harness.initialized();
    harness.add(producer, &[tp("a", 0)], V1);
    let (_, markers) = harness.end(producer, COMMIT, V1);
    assert_eq!(markers.len(), 1);
    let settled = harness.init(ID, None);
    assert_eq!(
        settled.answers,
        [Answer::InitProducerId {
            error: ErrorCode::ConcurrentTransactions,
            producer_id: -1,
            producer_epoch: -1
        }]
    );
}

#[test]
fn init_at_an_exhausted_epoch_moves_to_a_new_producer_id() {
    let mut harness = Harness::new();
    let (producer_id, _) = harness.initialized();
    let metadata = harness.coordinator.transactions.get_mut(ID).expect("known");
    metadata.producer_epoch = i16::MAX - 1;
    let request = harness.request();
    let init = harness.init_request(ID, Some((producer_id, i16::MAX - 1)));
    assert_eq!(
        harness.coordinator.init_producer_id(request, &init, 0),
        Err(NeedsProducerId)
    );
    let new_id = harness.supply_id();
    let actions = harness
        .coordinator
        .init_producer_id(request, &init, 0)
        .expect("id supplied");
    let settled = harness.settle(actions);
    assert_eq!(
        settled.answers,
        [Answer::InitProducerId {
            error: ErrorCode::None,
            producer_id: new_id,
            producer_epoch: 0
        }]
    );
    let metadata = harness.coordinator.transaction(ID).expect("known");
    assert_eq!(metadata.previous_producer_id, producer_id);
    assert_eq!(metadata.last_producer_epoch, i16::MAX - 1);
    // A retry naming the old id and exhausted epoch is the same initialization.
    let settled = harness.init(ID, Some((producer_id, i16::MAX - 1)));
    assert_eq!(
        settled.answers,
        [Answer::InitProducerId {
            error: ErrorCode::None,
            producer_id: new_id,
            producer_epoch: 0
        }]
    );
}

// ---- AddPartitionsToTxn, AddOffsetsToTxn, verification ----

#[test]
fn add_partitions_checks_the_producer_then_writes_ongoing() {
    let mut harness = Harness::new();
    let (producer_id, epoch) = harness.initialized();
    // handleAddPartitionsToTransaction's checks.
    assert_eq!(
        harness.add((producer_id + 1, epoch), &[tp("a", 0)], V1),
        ErrorCode::InvalidProducerIdMapping
    );
    assert_eq!(
        harness.add((producer_id, epoch + 1), &[tp("a", 0)], V1),
        ErrorCode::ProducerFenced
    );
    assert_eq!(
        harness.add((producer_id, epoch), &[tp("a", 0)], V1),
        ErrorCode::None
    );
    let metadata = harness.coordinator.transaction(ID).expect("known");
    assert_eq!(metadata.state, TransactionState::Ongoing);
    assert_eq!(metadata.start_time_ms, harness.now);
    // Already in the transaction: answered at once, nothing written.
    let records = harness.log.len();
    assert_eq!(
        harness.add((producer_id, epoch), &[tp("a", 0)], V1),
        ErrorCode::None
    );
    assert_eq!(harness.log.len(), records);
    harness.now += 10;
    assert_eq!(
        harness.add((producer_id, epoch), &[tp("a", 0), tp("b", 1)], V2),
        ErrorCode::None
    );
    let metadata = harness.coordinator.transaction(ID).expect("known");
    assert_eq!(metadata.partitions.len(), 2);
    assert_eq!(metadata.start_time_ms, harness.now - 10, "the start stays");
    assert_eq!(metadata.client_version, V2);
}

#[test]
fn add_partitions_for_unknown_or_pending_ids_is_refused() {
    let mut harness = Harness::new();
    assert_eq!(
        harness.add((1, 0), &[tp("a", 0)], V1),
        ErrorCode::InvalidProducerIdMapping
    );
    let producer = harness.initialized();
    let request = harness.request();
    let pending = harness.coordinator.add_partitions(
        request,
        &AddPartitionsRequest {
            transactional_id: ID.to_owned(),
            producer_id: producer.0,
            producer_epoch: producer.1,
            partitions: BTreeSet::from([tp("a", 0)]),
            client_version: V1,
        },
        0,
    );
    assert_eq!(pending.appends.len(), 1, "not written yet");
    // Kafka 4.4 checks a pending transition first, even before the producer.
    assert_eq!(
        harness.add((producer.0 + 9, producer.1), &[tp("b", 0)], V1),
        ErrorCode::ConcurrentTransactions
    );
}

#[test]
fn add_offsets_adds_the_groups_offsets_partition() {
    let mut harness = Harness::new();
    let producer = harness.initialized();
    let request = harness.request();
    let actions = harness.coordinator.add_offsets(
        request,
        &AddOffsetsRequest {
            transactional_id: ID.to_owned(),
            producer_id: producer.0,
            producer_epoch: producer.1,
            group_id: "hello".to_owned(),
        },
        harness.now,
    );
    let settled = harness.settle(actions);
    assert_eq!(
        settled.answers,
        [Answer::AddPartitions {
            error: ErrorCode::None
        }]
    );
    // Utils.abs("hello".hashCode()) % 50 = 99162322 % 50.
    let metadata = harness.coordinator.transaction(ID).expect("known");
    assert_eq!(
        metadata.partitions,
        BTreeSet::from([tp("__consumer_offsets", 22)])
    );
    assert_eq!(metadata.client_version, V1, "Kafka adds offsets as TV_0");
}

#[test]
fn verify_only_answers_per_partition_and_changes_nothing() {
    let mut harness = Harness::new();
    let producer = harness.initialized();
    harness.add(producer, &[tp("a", 0)], V1);
    let verify = |producer: (i64, i16)| VerifyPartitionsRequest {
        transactional_id: ID.to_owned(),
        producer_id: producer.0,
        producer_epoch: producer.1,
        partitions: BTreeSet::from([tp("a", 0), tp("b", 0)]),
    };
    // handleVerifyPartitionsInTransaction.
    assert_eq!(
        harness.coordinator.verify_partitions(&verify(producer)),
        [
            (tp("a", 0), ErrorCode::None),
            (tp("b", 0), ErrorCode::TransactionAbortable)
        ]
    );
    assert_eq!(
        harness
            .coordinator
            .verify_partitions(&verify((producer.0, producer.1 + 1))),
        [
            (tp("a", 0), ErrorCode::ProducerFenced),
            (tp("b", 0), ErrorCode::ProducerFenced)
        ]
    );
    let (_, markers) = harness.end(producer, COMMIT, V1);
    assert_eq!(
        harness.coordinator.verify_partitions(&verify(producer))[0].1,
        ErrorCode::ConcurrentTransactions
    );
    harness.markers_done(&markers);
    assert_eq!(
        harness.coordinator.verify_partitions(&verify(producer)),
        [
            (tp("a", 0), ErrorCode::TransactionAbortable),
            (tp("b", 0), ErrorCode::TransactionAbortable)
        ],
        "a completed transaction has no partitions"
    );
}

// ---- EndTxn ----

#[test]
fn v1_commit_answers_after_prepare_and_completes_after_the_markers() {
    let mut harness = Harness::new();
    let producer = harness.initialized();
    harness.add(producer, &[tp("a", 0), tp("a", 1)], V1);
    let (answer, markers) = harness.end(producer, COMMIT, V1);
    assert_eq!(answer, end_answer(ErrorCode::None, -1, -1));
    assert_eq!(
        markers,
        [TxnMarkers {
            transactional_id: ID.to_owned(),
            producer_id: producer.0,
            producer_epoch: producer.1,
            coordinator_epoch: 3,
            result: COMMIT,
            partitions: vec![tp("a", 0), tp("a", 1)],
            transaction_version: V1,
        }]
    );
    assert_eq!(harness.state(), TransactionState::PrepareCommit);
    // Markers in flight: the next transaction waits.
    assert_eq!(
        harness.add(producer, &[tp("b", 0)], V1),
        ErrorCode::ConcurrentTransactions
    );
    assert_eq!(
        harness.end(producer, COMMIT, V1).0,
        end_answer(ErrorCode::ConcurrentTransactions, -1, -1)
    );
    // Stale marker completions change nothing.
    let stale = harness
        .coordinator
        .markers_written(ID, producer.0, producer.1 - 1);
    assert!(stale.is_empty());
    harness.markers_done(&markers);
    assert_eq!(harness.state(), TransactionState::CompleteCommit);
    // endTransactionWithTV1: a repeated commit is NONE, an abort now INVALID_TXN_STATE.
    assert_eq!(
        harness.end(producer, COMMIT, V1).0,
        end_answer(ErrorCode::None, -1, -1)
    );
    assert_eq!(
        harness.end(producer, ABORT, V1).0,
        end_answer(ErrorCode::InvalidTxnState, -1, -1)
    );
    // The next transaction keeps the epoch (V1 never bumps on end).
    assert_eq!(harness.add(producer, &[tp("b", 0)], V1), ErrorCode::None);
    let (_, markers) = harness.end(producer, ABORT, V1);
    assert_eq!(markers[0].producer_epoch, producer.1);
}

#[test]
fn v1_end_refusals() {
    let mut harness = Harness::new();
    assert_eq!(
        harness.end((1, 0), COMMIT, V1).0,
        end_answer(ErrorCode::InvalidProducerIdMapping, -1, -1)
    );
    let producer = harness.initialized();
    for (producer, result, expected) in [
        (
            (producer.0 + 1, producer.1),
            COMMIT,
            ErrorCode::InvalidProducerIdMapping,
        ),
        // Strict epoch equality for clients.
        (
            (producer.0, producer.1 + 1),
            COMMIT,
            ErrorCode::ProducerFenced,
        ),
        (
            (producer.0, producer.1 - 1),
            COMMIT,
            ErrorCode::ProducerFenced,
        ),
        // Empty accepts neither in V1.
        (producer, COMMIT, ErrorCode::InvalidTxnState),
        (producer, ABORT, ErrorCode::InvalidTxnState),
    ] {
        assert_eq!(
            harness.end(producer, result, V1).0,
            end_answer(expected, -1, -1),
            "{producer:?} {result:?}"
        );
    }
    let request = harness.request();
    let actions = harness
        .coordinator
        .end_txn(
            request,
            &EndTxnRequest {
                transactional_id: String::new(),
                producer_id: producer.0,
                producer_epoch: producer.1,
                result: COMMIT,
                client_version: V1,
            },
            0,
        )
        .expect("no id needed");
    assert_eq!(
        actions.answers,
        [(request, end_answer(ErrorCode::InvalidRequest, -1, -1))]
    );
}

#[test]
fn v2_end_bumps_the_epoch_and_hands_it_out() {
    let mut harness = Harness::new();
    let (producer_id, epoch) = harness.initialized();
    harness.add((producer_id, epoch), &[tp("a", 0)], V2);
    let (answer, markers) = harness.end((producer_id, epoch), COMMIT, V2);
    // EndTxn v5: the id and epoch to use next.
    assert_eq!(answer, end_answer(ErrorCode::None, producer_id, epoch + 1));
    assert_eq!(
        markers[0].producer_epoch,
        epoch + 1,
        "markers fence the old epoch"
    );
    assert_eq!(markers[0].transaction_version, V2);
    // While the markers are out, a retry waits.
    assert_eq!(
        harness.end((producer_id, epoch), COMMIT, V2).0,
        end_answer(ErrorCode::ConcurrentTransactions, -1, -1)
    );
    harness.markers_done(&markers);
    // A retry (the epoch before the bump) is answered NONE with the current id and epoch.
    assert_eq!(
        harness.end((producer_id, epoch), COMMIT, V2).0,
        end_answer(ErrorCode::None, producer_id, epoch + 1)
    );
    // The old epoch can no longer add partitions.
    assert_eq!(
        harness.add((producer_id, epoch), &[tp("a", 0)], V2),
        ErrorCode::ProducerFenced
    );
    // Kafka's table: CompleteCommit + commit at the current epoch is INVALID_TXN_STATE,
    // + abort at the retry epoch too; abort at the current epoch bumps (an abort with
    // nothing added completes without markers).
    assert_eq!(
        harness.end((producer_id, epoch + 1), COMMIT, V2).0,
        end_answer(ErrorCode::InvalidTxnState, -1, -1)
    );
    assert_eq!(
        harness.end((producer_id, epoch), ABORT, V2).0,
        end_answer(ErrorCode::InvalidTxnState, -1, -1)
    );
    let (answer, markers) = harness.end((producer_id, epoch + 1), ABORT, V2);
    assert_eq!(answer, end_answer(ErrorCode::None, producer_id, epoch + 2));
    assert!(markers.is_empty());
    assert_eq!(harness.state(), TransactionState::CompleteAbort);
    // CompleteAbort: abort retry NONE, commit INVALID_TXN_STATE.
    assert_eq!(
        harness.end((producer_id, epoch + 1), ABORT, V2).0,
        end_answer(ErrorCode::None, producer_id, epoch + 2)
    );
    assert_eq!(
        harness.end((producer_id, epoch + 1), COMMIT, V2).0,
        end_answer(ErrorCode::InvalidTxnState, -1, -1)
    );
}

#[test]
fn v2_end_on_empty_follows_kafkas_table() {
    let mut harness = Harness::new();
    let (producer_id, epoch) = harness.initialized();
    // Empty: commit INVALID_TXN_STATE, abort bumps, a retry epoch is fenced.
    assert_eq!(
        harness.end((producer_id, epoch), COMMIT, V2).0,
        end_answer(ErrorCode::InvalidTxnState, -1, -1)
    );
    let metadata = harness.coordinator.transactions.get_mut(ID).expect("known");
    metadata.producer_epoch = epoch + 3;
    assert_eq!(
        harness.end((producer_id, epoch + 2), ABORT, V2).0,
        end_answer(ErrorCode::ProducerFenced, -1, -1)
    );
    let (answer, markers) = harness.end((producer_id, epoch + 3), ABORT, V2);
    assert_eq!(answer, end_answer(ErrorCode::None, producer_id, epoch + 4));
    assert!(markers.is_empty());
    let metadata = harness.coordinator.transaction(ID).expect("known");
    assert_eq!(metadata.state, TransactionState::CompleteAbort);
    assert_eq!(
        metadata.start_time_ms, harness.now,
        "the end stands in for a start"
    );
}

#[test]
fn v2_end_at_the_last_epoch_moves_to_a_new_producer_id() {
    let mut harness = Harness::new();
    let (producer_id, _) = harness.initialized();
    harness
        .coordinator
        .transactions
        .get_mut(ID)
        .expect("known")
        .producer_epoch = i16::MAX - 1;
    let producer = (producer_id, i16::MAX - 1);
    harness.add(producer, &[tp("a", 0)], V2);
    let request = harness.request();
    let end = EndTxnRequest {
        transactional_id: ID.to_owned(),
        producer_id,
        producer_epoch: i16::MAX - 1,
        result: COMMIT,
        client_version: V2,
    };
    assert_eq!(
        harness.coordinator.end_txn(request, &end, 0),
        Err(NeedsProducerId)
    );
    assert_eq!(
        harness.state(),
        TransactionState::Ongoing,
        "nothing changed"
    );
    let new_id = harness.supply_id();
    let actions = harness
        .coordinator
        .end_txn(request, &end, 0)
        .expect("supplied");
    let settled = harness.settle(actions);
    assert_eq!(settled.answers, [end_answer(ErrorCode::None, new_id, 0)]);
    // The markers still carry the old id, at the epoch past the last handed out.
    assert_eq!(
        (
            settled.markers[0].producer_id,
            settled.markers[0].producer_epoch
        ),
        (producer_id, i16::MAX)
    );
    harness.markers_done(&settled.markers);
    let metadata = harness.coordinator.transaction(ID).expect("known");
    assert_eq!((metadata.producer_id, metadata.producer_epoch), (new_id, 0));
    // retryOnOverflow: the old id at the last epoch is a retry.
    assert_eq!(
        harness.end(producer, COMMIT, V2).0,
        end_answer(ErrorCode::None, new_id, 0)
    );
}

// ---- Timeouts and expiration ----

#[test]
fn timed_out_transactions_are_aborted_with_the_epoch_bumped() {
    let mut harness = Harness::new();
    let producer = harness.initialized();
    harness.add(producer, &[tp("a", 0)], V1);
    let start = harness.now;
    // Not before the check interval, nor before the timeout has passed.
    assert!(harness.coordinator.tick(start + 60_000).is_empty());
    let actions = harness
        .coordinator
        .abort_timed_out_transactions(start + 60_000);
    assert!(actions.is_empty(), "startTime + timeout < now is needed");
    harness.now = start + 70_000;
    let actions = harness.coordinator.tick(harness.now);
    let settled = harness.settle(actions);
    assert!(settled.answers.is_empty());
    let [markers] = &settled.markers[..] else {
        panic!("abort markers: {settled:?}");
    };
    assert_eq!(
        (markers.result, markers.producer_epoch),
        (ABORT, producer.1 + 1)
    );
    harness.markers_done(&settled.markers);
    assert_eq!(harness.state(), TransactionState::CompleteAbort);
    // The producer finds itself fenced.
    assert_eq!(
        harness.end(producer, COMMIT, V1).0,
        end_answer(ErrorCode::ProducerFenced, -1, -1)
    );
    assert_eq!(
        harness.add(producer, &[tp("a", 0)], V1),
        ErrorCode::ProducerFenced
    );
}

#[test]
fn a_v1_broker_aborts_timed_out_transactions_with_the_fence_epoch() {
    let mut harness = Harness::with_config(CoordinatorConfig {
        transaction_version: TransactionVersion::V1,
        ..CoordinatorConfig::default()
    });
    let producer = harness.initialized();
    harness.add(producer, &[tp("a", 0)], V1);
    let actions = harness
        .coordinator
        .abort_timed_out_transactions(harness.now + 60_001);
    let [append] = &actions.appends[..] else {
        panic!("one record: {actions:?}");
    };
    let value = append.value.as_ref().expect("value");
    assert_eq!(value.version, 1);
    assert_eq!(value.producer_epoch, producer.1 + 1);
    assert_eq!(value.client_transaction_version, 0, "written as TV_0");
    // The record fails: the epoch stays bumped in memory, and the next fence does not bump
    // again (hasFailedEpochFence).
    let write_id = append.write_id;
    let failed = harness.coordinator.append_completed(
        write_id,
        Err(ErrorCode::NotEnoughReplicas),
        harness.now,
    );
    assert!(failed.is_empty());
    let metadata = harness.coordinator.transaction(ID).expect("known");
    assert!(metadata.has_failed_epoch_fence);
    assert_eq!(metadata.producer_epoch, producer.1 + 1);
    let actions = harness
        .coordinator
        .abort_timed_out_transactions(harness.now + 60_002);
    assert_eq!(
        actions.appends[0]
            .value
            .as_ref()
            .map(|value| value.producer_epoch),
        Some(producer.1 + 1)
    );
}

#[test]
fn idle_settled_ids_expire_with_a_tombstone() {
    let mut harness = Harness::new();
    let producer = harness.initialized();
    let idle_since = harness.now;
    let week = CoordinatorConfig::default().transactional_id_expiration_ms;
    assert!(harness
        .coordinator
        .expire_transactional_ids(idle_since + week - 1)
        .is_empty());
    // An ongoing transaction never expires.
    harness.add(producer, &[tp("a", 0)], V1);
    assert!(harness
        .coordinator
        .expire_transactional_ids(idle_since + 2 * week)
        .is_empty());
    let (_, markers) = harness.end(producer, ABORT, V1);
    harness.markers_done(&markers);
    harness.now = idle_since + 2 * week;
    let actions = harness.coordinator.tick(harness.now);
    let [append] = &actions.appends[..] else {
        panic!("one tombstone: {actions:?}");
    };
    assert_eq!(append.value, None);
    // Kafka looks at the state, not the pending one: still described until removed.
    assert_eq!(harness.coordinator.describe(ID).error, ErrorCode::None);
    harness.settle(actions);
    assert_eq!(
        harness.coordinator.describe(ID).error,
        ErrorCode::TransactionalIdNotFound
    );
    assert!(harness.coordinator.transaction(ID).is_none());
    assert_eq!(
        harness.end(producer, ABORT, V1).0,
        end_answer(ErrorCode::InvalidProducerIdMapping, -1, -1)
    );
    // The tombstone removes it from a reload too.
    let (reloaded, _) = harness.reload();
    assert!(reloaded.transaction(ID).is_none());
}

// ---- Appends that fail ----

#[test]
fn a_failed_append_answers_kafkas_mapped_error_and_changes_nothing() {
    let mut harness = Harness::new();
    let producer = harness.initialized();
    for (append_error, answered) in [
        (
            ErrorCode::NotEnoughReplicas,
            ErrorCode::CoordinatorNotAvailable,
        ),
        (
            ErrorCode::RequestTimedOut,
            ErrorCode::CoordinatorNotAvailable,
        ),
        (ErrorCode::NotLeaderOrFollower, ErrorCode::NotCoordinator),
        (ErrorCode::KafkaStorageError, ErrorCode::NotCoordinator),
        (ErrorCode::MessageTooLarge, ErrorCode::UnknownServerError),
    ] {
        let request = harness.request();
        let actions = harness.coordinator.add_partitions(
            request,
            &AddPartitionsRequest {
                transactional_id: ID.to_owned(),
                producer_id: producer.0,
                producer_epoch: producer.1,
                partitions: BTreeSet::from([tp("a", 0)]),
                client_version: V1,
            },
            0,
        );
        let failed =
            harness
                .coordinator
                .append_completed(actions.appends[0].write_id, Err(append_error), 0);
        assert_eq!(
            failed.answers,
            [(request, Answer::AddPartitions { error: answered })]
        );
        assert_eq!(harness.state(), TransactionState::Empty);
        assert!(!harness
            .coordinator
            .transaction(ID)
            .expect("known")
            .pending_transition_in_progress());
    }
    // A report for an append already reported changes nothing.
    assert!(harness
        .coordinator
        .append_completed(WriteId(0), Ok(()), 0)
        .is_empty());
}

#[test]
fn a_failed_complete_record_is_appended_again() {
    let mut harness = Harness::new();
    let producer = harness.initialized();
    harness.add(producer, &[tp("a", 0)], V1);
    let (_, markers) = harness.end(producer, COMMIT, V1);
    let actions = harness
        .coordinator
        .markers_written(ID, producer.0, producer.1);
    let first = actions.appends[0].write_id;
    let retried = harness
        .coordinator
        .append_completed(first, Err(ErrorCode::NotEnoughReplicas), 0);
    assert_eq!(retried.appends.len(), 1, "Kafka retries the completion");
    assert_ne!(retried.appends[0].write_id, first);
    harness.settle(retried);
    assert_eq!(harness.state(), TransactionState::CompleteCommit);
    assert_eq!(markers.len(), 1);
}

// ---- Loading ----

#[test]
fn loading_replays_the_records_and_finishes_prepared_transactions() {
    let mut harness = Harness::new();
    let producer = harness.initialized();
    harness.add(producer, &[tp("a", 0), tp("b", 2)], V2);
    let (_, markers) = harness.end(producer, COMMIT, V2);
    // The coordinator stops with the markers out; another loads the partition.
    let (mut reloaded, actions) = harness.reload();
    let metadata = reloaded.transaction(ID).expect("loaded");
    assert_eq!(metadata.state, TransactionState::PrepareCommit);
    assert_eq!(
        metadata.pending_state,
        Some(TransactionState::CompleteCommit)
    );
    assert_eq!(metadata.last_producer_epoch, -1, "not in the record");
    let [resent] = &actions.markers[..] else {
        panic!("markers sent again: {actions:?}");
    };
    assert_eq!(
        TxnMarkers {
            coordinator_epoch: 4,
            ..markers[0].clone()
        },
        *resent
    );
    let completion = reloaded.markers_written(ID, resent.producer_id, resent.producer_epoch);
    let [append] = &completion.appends[..] else {
        panic!("the Complete record: {completion:?}");
    };
    reloaded.append_completed(append.write_id, Ok(()), 9);
    assert_eq!(
        reloaded.transaction(ID).map(|metadata| metadata.state),
        Some(TransactionState::CompleteCommit)
    );
}

#[test]
fn loading_skips_unknown_versions_and_refuses_corrupt_records() {
    let mut harness = Harness::new();
    harness.initialized();
    let key = Bytes::from(
        encode_key(&crate::transactions::log_format::TransactionLogKey {
            transactional_id: ID.to_owned(),
        })
        .expect("encodes"),
    );
    let mut records = harness.log.clone();
    // A group-coordinator key type and a future value version: skipped.
    records.push((Bytes::from_static(&[0, 9, 0, 0]), None));
    records.push((key.clone(), Some(Bytes::from_static(&[0, 7, 1, 2, 3]))));
    let (loaded, actions) = TransactionCoordinator::load(
        partition_for(ID),
        1,
        CoordinatorConfig::default(),
        records.clone(),
        0,
    )
    .expect("loads");
    assert!(actions.is_empty());
    assert_eq!(
        loaded.transaction(ID).map(|metadata| metadata.state),
        Some(TransactionState::Empty)
    );
    // A truncated value and an unknown state are refused, with the record's position.
    let valid = records[0].1.clone().expect("a value");
    let mut bad_state = decode_value(valid.clone()).expect("decodes");
    bad_state.transaction_status = 9;
    for (value, expected) in [
        (valid.slice(..valid.len() - 1), "truncated"),
        (
            Bytes::from(encode_value(&bad_state).expect("encodes")),
            "unknown state",
        ),
    ] {
        let mut broken = records.clone();
        broken.push((key.clone(), Some(value)));
        let error = TransactionCoordinator::load(
            partition_for(ID),
            1,
            CoordinatorConfig::default(),
            broken,
            0,
        )
        .expect_err(expected);
        assert_eq!(error.index, records.len(), "{expected}");
    }
}

// ---- Describe and List ----

#[test]
fn describe_and_list_show_kafkas_names_and_filters() {
    let mut harness = Harness::new();
    let producer = harness.initialized();
    harness.add(producer, &[tp("b", 1), tp("a", 0)], V1);
    let described = harness.coordinator.describe(ID);
    assert_eq!(described.error, ErrorCode::None);
    let view = described.transaction.expect("described");
    assert_eq!(view.state, "Ongoing");
    assert_eq!(view.partitions, [tp("a", 0), tp("b", 1)]);
    assert_eq!(view.timeout_ms, 60_000);
    assert_eq!(view.start_time_ms, harness.now);
    assert_eq!(
        harness.coordinator.describe("").error,
        ErrorCode::InvalidRequest
    );
    assert_eq!(
        harness.coordinator.describe("txn-7").error,
        ErrorCode::NotCoordinator
    );
    let list = |filter: ListFilter, now| harness.coordinator.list(&filter, now);
    let all = list(ListFilter::default(), 0);
    assert_eq!(all.transactions.len(), 1);
    assert_eq!(all.transactions[0].state, "Ongoing");
    let by_state = list(
        ListFilter {
            states: vec!["Empty".into(), "Bogus".into()],
            ..ListFilter::default()
        },
        0,
    );
    assert!(by_state.transactions.is_empty());
    assert_eq!(by_state.unknown_state_filters, ["Bogus"]);
    let by_producer = list(
        ListFilter {
            producer_ids: vec![producer.0],
            ..ListFilter::default()
        },
        0,
    );
    assert_eq!(by_producer.transactions.len(), 1);
    // Duration: only transactions running longer than it.
    let started = harness.now;
    for (now, count) in [(started + 500, 0), (started + 501, 1)] {
        let by_duration = list(
            ListFilter {
                duration_ms: 500,
                ..ListFilter::default()
            },
            now,
        );
        assert_eq!(by_duration.transactions.len(), count, "{now}");
    }
    for (pattern, count) in [("my-.*", 1), ("my", 0), ("", 1)] {
        let by_pattern = list(
            ListFilter {
                transactional_id_pattern: Some(pattern.into()),
                ..ListFilter::default()
            },
            0,
        );
        assert_eq!(by_pattern.transactions.len(), count, "{pattern}");
    }
    assert_eq!(
        list(
            ListFilter {
                transactional_id_pattern: Some("(".into()),
                ..ListFilter::default()
            },
            0
        )
        .error,
        ErrorCode::InvalidRegularExpression
    );
}
