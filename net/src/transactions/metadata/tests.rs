use std::collections::BTreeSet;

use bytes::Bytes;

use super::*;
use crate::transactions::log_format::{decode_value, encode_value};

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).expect("hex digit"))
        .collect()
}

fn partitions(list: &[(&str, i32)]) -> BTreeSet<TopicPartition> {
    list.iter()
        .map(|(topic, partition)| TopicPartition::new(*topic, *partition))
        .collect()
}

/// An initialized id at `epoch`, Empty.
fn initialized(epoch: i16) -> TransactionMetadata {
    let mut metadata = TransactionMetadata::new_unwritten("t".into(), 100, 60_000, 0);
    metadata.producer_epoch = epoch;
    metadata
}

fn apply(
    metadata: &mut TransactionMetadata,
    prepare: impl FnOnce(&mut TransactionMetadata) -> Result<TxnTransitMetadata, TransitionError>,
) -> TxnTransitMetadata {
    let transit = prepare(metadata).expect("transition allowed");
    metadata
        .complete_transition(&transit)
        .expect("completion accepted");
    transit
}

#[test]
fn transits_encode_as_kafkas_value_to_bytes() {
    // TransactionLog.valueToBytes goldens from TransactionLogGolden.java.
    let ongoing = TxnTransitMetadata {
        producer_id: 8000,
        previous_producer_id: 7999,
        next_producer_id: -1,
        producer_epoch: 12,
        last_producer_epoch: 11,
        timeout_ms: 60_000,
        state: TransactionState::Ongoing,
        partitions: partitions(&[("orders", 3)]),
        start_time_ms: 1_700_000_100_000,
        last_update_time_ms: 1_700_000_100_500,
        client_version: TransactionVersion::V2,
    };
    assert_eq!(
        encode_value(&ongoing.to_log_value(TransactionVersion::V2)).expect("encodes"),
        hex("00010000000000001f40000c0000ea600102076f72646572730200000003000000018bcfe6f0940000018bcfe6eea00200080000000000001f3f02020002")
    );
    let empty = TxnTransitMetadata {
        producer_id: 8001,
        previous_producer_id: -1,
        next_producer_id: -1,
        producer_epoch: 0,
        last_producer_epoch: -1,
        timeout_ms: 60_000,
        state: TransactionState::Empty,
        partitions: BTreeSet::new(),
        start_time_ms: -1,
        last_update_time_ms: 1_700_000_200_000,
        client_version: TransactionVersion::V0,
    };
    assert_eq!(
        encode_value(&empty.to_log_value(TransactionVersion::V0)).expect("encodes"),
        hex("00000000000000001f4100000000ea6000ffffffff0000018bcfe87540ffffffffffffffff")
    );
    assert_eq!(
        encode_value(&empty.to_log_value(TransactionVersion::V2)).expect("encodes"),
        hex("00010000000000001f4100000000ea6000000000018bcfe87540ffffffffffffffff00")
    );
    let complete = TxnTransitMetadata {
        producer_id: 9001,
        previous_producer_id: 9000,
        next_producer_id: -1,
        producer_epoch: 0,
        last_producer_epoch: 32766,
        timeout_ms: 60_000,
        state: TransactionState::CompleteCommit,
        partitions: BTreeSet::new(),
        start_time_ms: 1_700_000_300_000,
        last_update_time_ms: 1_700_000_301_000,
        client_version: TransactionVersion::V2,
    };
    let bytes = hex("0001000000000000232900000000ea6004010000018bcfe9ffc80000018bcfe9fbe0020008000000000000232802020002");
    assert_eq!(
        encode_value(&complete.to_log_value(TransactionVersion::V2)).expect("encodes"),
        bytes
    );
    // Read back as Kafka's TransactionLog.read does: the last epoch is not stored.
    let loaded = TransactionMetadata::from_log_value(
        "t".into(),
        &decode_value(Bytes::from(bytes)).expect("decodes"),
    )
    .expect("loads");
    assert_eq!(loaded.producer_id, 9001);
    assert_eq!(loaded.previous_producer_id, 9000);
    assert_eq!(loaded.last_producer_epoch, -1);
    assert_eq!(loaded.state, TransactionState::CompleteCommit);
    assert_eq!(loaded.client_version, TransactionVersion::V2);
}

#[test]
fn loading_refuses_unknown_states_and_versions() {
    let mut value = TxnTransitMetadata {
        producer_id: 1,
        previous_producer_id: -1,
        next_producer_id: -1,
        producer_epoch: 0,
        last_producer_epoch: -1,
        timeout_ms: 1,
        state: TransactionState::Empty,
        partitions: BTreeSet::new(),
        start_time_ms: -1,
        last_update_time_ms: 0,
        client_version: TransactionVersion::V0,
    }
    .to_log_value(TransactionVersion::V2);
    value.transaction_status = 8;
    assert_eq!(
        TransactionMetadata::from_log_value("t".into(), &value),
        Err(TransactionLogError::UnknownState(8))
    );
    value.transaction_status = 0;
    value.client_transaction_version = 3;
    assert_eq!(
        TransactionMetadata::from_log_value("t".into(), &value),
        Err(TransactionLogError::UnknownTransactionVersion(3))
    );
}

#[test]
fn init_bumps_and_recognises_retries_kip_360() {
    // Kafka's prepareIncrementProducerEpoch: no expected epoch → bump, last = -1.
    let mut metadata = initialized(-1);
    let transit = apply(&mut metadata, |metadata| {
        metadata.prepare_increment_producer_epoch(30_000, None, 5)
    });
    assert_eq!(
        (transit.producer_epoch, transit.last_producer_epoch),
        (0, -1)
    );
    // Expected = current → bump, last = current.
    let transit = apply(&mut metadata, |metadata| {
        metadata.prepare_increment_producer_epoch(30_000, Some(0), 6)
    });
    assert_eq!(
        (transit.producer_epoch, transit.last_producer_epoch),
        (1, 0)
    );
    // Expected = last → the retry gets the current epoch, nothing bumps.
    let transit = apply(&mut metadata, |metadata| {
        metadata.prepare_increment_producer_epoch(30_000, Some(0), 7)
    });
    assert_eq!(
        (transit.producer_epoch, transit.last_producer_epoch),
        (1, 0)
    );
    // Anything else is fenced.
    assert!(matches!(
        metadata.prepare_increment_producer_epoch(30_000, Some(7), 8),
        Err(TransitionError::ProducerFenced { .. })
    ));
    assert_eq!(
        metadata.pending_state, None,
        "a refusal leaves nothing pending"
    );
}

#[test]
fn exhausted_epochs_refuse_increment_and_allow_rotation() {
    let mut metadata = initialized(i16::MAX - 1);
    assert!(metadata.is_producer_epoch_exhausted());
    assert_eq!(
        metadata.prepare_increment_producer_epoch(1, None, 0),
        Err(TransitionError::EpochExhausted(100))
    );
    let transit = apply(&mut metadata, |metadata| {
        metadata.prepare_producer_id_rotation(200, 1, 9, true)
    });
    assert_eq!(
        (
            transit.producer_id,
            transit.previous_producer_id,
            transit.producer_epoch,
            transit.last_producer_epoch
        ),
        (200, 100, 0, i16::MAX - 1)
    );
}

#[test]
fn v1_end_keeps_the_epoch_and_v2_end_bumps_it() {
    for (version, epoch_after) in [(TransactionVersion::V0, 4), (TransactionVersion::V2, 5)] {
        let mut metadata = initialized(4);
        apply(&mut metadata, |metadata| {
            metadata.prepare_add_partitions(&partitions(&[("a", 0)]), 10, version)
        });
        assert_eq!(metadata.start_time_ms, 10);
        let prepare = apply(&mut metadata, |metadata| {
            metadata.prepare_abort_or_commit(
                TransactionState::PrepareCommit,
                version,
                NO_PRODUCER_ID,
                20,
                false,
            )
        });
        assert_eq!(prepare.producer_epoch, epoch_after, "{version:?}");
        assert_eq!(prepare.partitions, partitions(&[("a", 0)]));
        let complete = apply(&mut metadata, |metadata| metadata.prepare_complete(30));
        assert_eq!(complete.state, TransactionState::CompleteCommit);
        assert_eq!(complete.producer_epoch, epoch_after);
        assert!(complete.partitions.is_empty());
        assert_eq!(complete.start_time_ms, 10, "the start stays for Describe");
    }
}

#[test]
fn v2_overflow_moves_to_the_next_producer_id_at_completion() {
    let mut metadata = initialized(i16::MAX - 1);
    apply(&mut metadata, |metadata| {
        metadata.prepare_add_partitions(&partitions(&[("a", 0)]), 10, TransactionVersion::V2)
    });
    let prepare = apply(&mut metadata, |metadata| {
        metadata.prepare_abort_or_commit(
            TransactionState::PrepareCommit,
            TransactionVersion::V2,
            777,
            20,
            false,
        )
    });
    assert_eq!(
        (prepare.producer_id, prepare.producer_epoch),
        (100, i16::MAX)
    );
    assert_eq!(prepare.next_producer_id, 777);
    let complete = apply(&mut metadata, |metadata| metadata.prepare_complete(30));
    assert_eq!((complete.producer_id, complete.producer_epoch), (777, 0));
    assert_eq!(complete.previous_producer_id, 100);
    assert_eq!(complete.last_producer_epoch, i16::MAX - 1);
    assert_eq!(complete.next_producer_id, NO_PRODUCER_ID);
}

#[test]
fn fencing_bumps_once_and_not_again_after_a_failed_fence() {
    let mut metadata = initialized(3);
    apply(&mut metadata, |metadata| {
        metadata.prepare_add_partitions(&partitions(&[("a", 0)]), 10, TransactionVersion::V0)
    });
    let fence = metadata
        .prepare_fence_producer_epoch()
        .expect("Ongoing can be fenced");
    assert_eq!(fence.state, TransactionState::PrepareEpochFence);
    assert_eq!(fence.producer_epoch, 4);
    assert!(matches!(
        metadata.complete_transition(&fence),
        Err(TransitionError::UnexpectedCompletion { .. })
    ));
    metadata.pending_state = None;
    metadata.has_failed_epoch_fence = true;
    let again = metadata.prepare_fence_producer_epoch().expect("allowed");
    assert_eq!(again.producer_epoch, 3);
}

#[test]
fn illegal_transitions_are_refused() {
    let mut metadata = initialized(0);
    assert_eq!(
        metadata.prepare_abort_or_commit(
            TransactionState::PrepareCommit,
            TransactionVersion::V0,
            NO_PRODUCER_ID,
            1,
            false
        ),
        Err(TransitionError::IllegalTransition {
            from: TransactionState::Empty,
            to: TransactionState::PrepareCommit
        })
    );
    assert!(matches!(
        metadata.prepare_fence_producer_epoch(),
        Err(TransitionError::IllegalTransition { .. })
    ));
    let _pending = metadata
        .prepare_add_partitions(&partitions(&[("a", 1)]), 1, TransactionVersion::V0)
        .expect("allowed");
    assert_eq!(
        metadata.prepare_dead(),
        Err(TransitionError::AlreadyPending {
            pending: TransactionState::Ongoing
        })
    );
    // A completion that does not match what is pending changes nothing.
    let commit = TxnTransitMetadata {
        state: TransactionState::PrepareCommit,
        ..empty_transit()
    };
    assert!(metadata.complete_transition(&commit).is_err());
    assert_eq!(metadata.state, TransactionState::Empty);
    assert_eq!(metadata.pending_state, Some(TransactionState::Ongoing));
}

fn empty_transit() -> TxnTransitMetadata {
    TxnTransitMetadata {
        producer_id: 100,
        previous_producer_id: -1,
        next_producer_id: -1,
        producer_epoch: 0,
        last_producer_epoch: -1,
        timeout_ms: 60_000,
        state: TransactionState::Empty,
        partitions: BTreeSet::new(),
        start_time_ms: -1,
        last_update_time_ms: 0,
        client_version: TransactionVersion::V0,
    }
}

#[test]
fn a_v2_commit_at_the_last_epoch_is_refused() {
    // Kafka's short wraps to a negative epoch, which prepareTransitionTo refuses.
    let mut metadata = initialized(i16::MAX);
    metadata.state = TransactionState::Ongoing;
    assert!(matches!(
        metadata.prepare_abort_or_commit(
            TransactionState::PrepareCommit,
            TransactionVersion::V2,
            NO_PRODUCER_ID,
            1,
            false
        ),
        Err(TransitionError::IllegalProducer { .. })
    ));
    // An abort (of a fenced producer) stays at the last epoch.
    let abort = metadata
        .prepare_abort_or_commit(
            TransactionState::PrepareAbort,
            TransactionVersion::V2,
            NO_PRODUCER_ID,
            1,
            false,
        )
        .expect("allowed");
    assert_eq!(abort.producer_epoch, i16::MAX);
}
