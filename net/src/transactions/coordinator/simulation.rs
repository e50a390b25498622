//! A seeded simulation of one `__transaction_state` partition's coordinator: V1 and V2
//! producers (several instances per transactional id, so newer ones fence older ones) send
//! InitProducerId, adds, ends, and again the same requests late; record appends succeed,
//! fail or are cut short by a crash; markers are written in any order; time passes; the
//! coordinator is reloaded from the records it wrote. After every step the invariants
//! below are checked. A failure prints its seed; `KAAS_SIM_SEED=<seed>` replays one.
//!
//! Invariants:
//! - a transactional id's producer id and epoch never go down: not in the records, not in
//!   memory against its latest record, not in the answers;
//! - an instance fenced by a newer one's InitProducerId never again gets NONE for an add,
//!   an end or a re-initialization;
//! - commit markers go out only for a transaction whose EndTxn(commit) was sent, cover only
//!   partitions that producer added, and no transaction gets both commit and abort markers;
//!   every commit answered NONE has commit markers;
//! - loading the records gives the live state (for every id without an append in flight);
//! - once every append is written and every marker confirmed, nothing is left prepared.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::transactions::log_format::decode_value;
use crate::transactions::partition_for;

const TOPICS: [&str; 2] = ["a", "b"];
const GROUPS: [&str; 2] = ["g1", "g2"];

#[derive(Debug, Clone)]
struct Instance {
    id: String,
    version: TransactionVersion,
    producer: Option<(i64, i16)>,
    /// Another instance of the id was initialized after this one.
    fenced: bool,
    last_request: Option<Request>,
}

#[derive(Debug, Clone)]
enum Request {
    Init(InitProducerIdRequest),
    Add(AddPartitionsRequest),
    Offsets(AddOffsetsRequest),
    End(EndTxnRequest),
}

struct Sim {
    rng: StdRng,
    config: CoordinatorConfig,
    coordinator: TransactionCoordinator,
    coordinator_epoch: i32,
    now: i64,
    next_producer_id: i64,
    next_request: u64,
    instances: Vec<Instance>,
    /// Which instance sent each unanswered request, and what it was.
    in_flight: BTreeMap<RequestId, (usize, Request)>,
    /// Appends asked for and not reported, oldest first.
    appends: Vec<LogAppend>,
    /// Markers handed out and not confirmed.
    markers: Vec<TxnMarkers>,
    /// The partition's records.
    log: Vec<(Bytes, Option<Bytes>)>,
    // What the invariants look at.
    commit_requests: BTreeSet<(String, i64, i16)>,
    added_by: BTreeMap<(String, i64, i16), BTreeSet<TopicPartition>>,
    acknowledged_commits: Vec<(String, i64, i16, TransactionVersion)>,
    highest_answered: BTreeMap<String, (i64, i16)>,
    /// How often the rarer paths ran, so the test can tell they did.
    coverage: Coverage,
}

#[derive(Debug, Default, Clone, Copy)]
struct Coverage {
    /// A V2 end moved the producer to a new id.
    overflows: u64,
    /// InitProducerId moved the producer to a new id.
    rotations: u64,
    /// A fenced instance was refused.
    fenced_refusals: u64,
    /// Reloads after a crash or a move.
    reloads: u64,
    /// Commits acknowledged.
    commits: u64,
}

impl Sim {
    fn new(seed: u64, server_version: TransactionVersion) -> Sim {
        let mut rng = StdRng::seed_from_u64(seed);
        let config = CoordinatorConfig {
            transaction_max_timeout_ms: 20_000,
            transactional_id_expiration_ms: 30_000,
            abort_timed_out_transactions_interval_ms: 1_000,
            remove_expired_transactional_ids_interval_ms: 5_000,
            transaction_version: server_version,
        };
        let partition = partition_for("sim-0");
        let ids: Vec<String> = (0..200)
            .map(|n| format!("sim-{n}"))
            .filter(|id| partition_for(id) == partition)
            .take(3)
            .collect();
        let mut instances = Vec::new();
        for id in &ids {
            // A broker below transaction.version 2 does not offer EndTxn v5 / AddPartitionsToTxn
            // v4+ to clients, so its clients all speak V1.
            let version = if server_version.supports_epoch_bump() && rng.random_bool(0.5) {
                TransactionVersion::V2
            } else {
                TransactionVersion::V0
            };
            instances.push(Instance {
                id: id.clone(),
                version,
                producer: None,
                fenced: false,
                last_request: None,
            });
        }
        let mut sim = Sim {
            coordinator: TransactionCoordinator::new(partition, 0, config.clone(), 0),
            config,
            coordinator_epoch: 0,
            now: 0,
            next_producer_id: 1_000,
            next_request: 0,
            instances,
            in_flight: BTreeMap::new(),
            appends: Vec::new(),
            markers: Vec::new(),
            log: Vec::new(),
            commit_requests: BTreeSet::new(),
            added_by: BTreeMap::new(),
            acknowledged_commits: Vec::new(),
            highest_answered: BTreeMap::new(),
            coverage: Coverage::default(),
            rng,
        };
        // Some ids start near the end of their epochs, so rotations and V2 overflows happen.
        if sim.rng.random_bool(0.5) {
            let id = ids[0].clone();
            sim.next_producer_id += 1;
            let value = TxnTransitMetadata {
                producer_id: sim.next_producer_id,
                previous_producer_id: -1,
                next_producer_id: -1,
                producer_epoch: i16::MAX - 4,
                last_producer_epoch: -1,
                timeout_ms: 10_000,
                state: TransactionState::CompleteCommit,
                partitions: BTreeSet::new(),
                start_time_ms: 0,
                last_update_time_ms: 0,
                client_version: TransactionVersion::V2,
            }
            .to_log_value(server_version);
            sim.log.push((
                Bytes::from(
                    encode_key(&TransactionLogKey {
                        transactional_id: id,
                    })
                    .expect("key"),
                ),
                Some(Bytes::from(encode_value(&value).expect("value"))),
            ));
            sim.reload("seeded near the last epoch");
        }
        sim
    }

    fn supply(&mut self) {
        self.next_producer_id += 1;
        self.coordinator.supply_producer_id(self.next_producer_id);
    }

    fn take(&mut self, mut actions: Actions) {
        for _ in 0..actions.producer_ids_wanted {
            self.supply();
        }
        for (request, answer) in actions.answers.drain(..) {
            self.answered(request, answer);
        }
        for markers in &actions.markers {
            self.check_markers(markers);
        }
        self.markers.append(&mut actions.markers);
        self.appends.append(&mut actions.appends);
    }

    fn send(&mut self, instance: usize, request: Request) {
        self.next_request += 1;
        let request_id = RequestId(self.next_request);
        let now = self.now;
        match &request {
            Request::Add(add) => {
                self.added_by
                    .entry((
                        add.transactional_id.clone(),
                        add.producer_id,
                        add.producer_epoch,
                    ))
                    .or_default()
                    .extend(add.partitions.iter().cloned());
            }
            Request::Offsets(add) => {
                let partition = TopicPartition::new(
                    crate::model::offsets_topic::NAME,
                    crate::model::offsets_topic::partition_for(&add.group_id),
                );
                self.added_by
                    .entry((
                        add.transactional_id.clone(),
                        add.producer_id,
                        add.producer_epoch,
                    ))
                    .or_default()
                    .insert(partition);
            }
            Request::End(end) if end.result == TransactionResult::Commit => {
                self.commit_requests.insert((
                    end.transactional_id.clone(),
                    end.producer_id,
                    end.producer_epoch,
                ));
            }
            _ => {}
        }
        self.instances[instance].last_request = Some(request.clone());
        self.in_flight
            .insert(request_id, (instance, request.clone()));
        let actions = loop {
            let decided = match &request {
                Request::Init(init) => self.coordinator.init_producer_id(request_id, init, now),
                Request::Add(add) => Ok(self.coordinator.add_partitions(request_id, add, now)),
                Request::Offsets(add) => Ok(self.coordinator.add_offsets(request_id, add, now)),
                Request::End(end) => self.coordinator.end_txn(request_id, end, now),
            };
            match decided {
                Ok(actions) => break actions,
                Err(NeedsProducerId) => self.supply(),
            }
        };
        self.take(actions);
    }

    fn answered(&mut self, request: RequestId, answer: Answer) {
        let Some((index, sent)) = self.in_flight.remove(&request) else {
            panic!("answer to a request never sent or already answered: {request:?}");
        };
        let lost = self.rng.random_bool(0.1);
        let instance = self.instances[index].clone();
        let id = instance.id.clone();
        let success = |error: ErrorCode| error == ErrorCode::None;
        if instance.fenced {
            self.coverage.fenced_refusals += 1;
        }
        match (answer, &sent) {
            (
                Answer::InitProducerId {
                    error,
                    producer_id,
                    producer_epoch,
                },
                Request::Init(init),
            ) => {
                if success(error) {
                    assert!(
                        !(instance.fenced && init.expected.is_some()),
                        "fenced instance {index} of {id} re-initialized: {init:?}"
                    );
                    if self
                        .highest_answered
                        .get(&id)
                        .is_some_and(|(highest, _)| *highest != producer_id)
                    {
                        self.coverage.rotations += 1;
                    }
                    self.check_answered(&id, producer_id, producer_epoch);
                    if !lost {
                        for (other, peer) in self.instances.iter_mut().enumerate() {
                            if peer.id == id && other != index {
                                peer.fenced = true;
                            }
                        }
                        let me = &mut self.instances[index];
                        me.producer = Some((producer_id, producer_epoch));
                        me.fenced = false;
                    }
                }
            }
            (Answer::AddPartitions { error }, Request::Add(_) | Request::Offsets(_)) => {
                assert!(
                    !(success(error) && instance.fenced),
                    "fenced instance {index} of {id} added partitions: {sent:?}"
                );
            }
            (
                Answer::EndTxn {
                    error,
                    producer_id,
                    producer_epoch,
                },
                Request::End(end),
            ) => {
                if success(error) {
                    assert!(
                        !instance.fenced,
                        "fenced instance {index} of {id} ended a transaction: {end:?}"
                    );
                    if producer_id != end.producer_id && producer_id != -1 {
                        self.coverage.overflows += 1;
                    }
                    if end.result == TransactionResult::Commit {
                        self.coverage.commits += 1;
                        self.acknowledged_commits.push((
                            id.clone(),
                            end.producer_id,
                            end.producer_epoch,
                            end.client_version,
                        ));
                    }
                    if end.client_version.supports_epoch_bump() {
                        self.check_answered(&id, producer_id, producer_epoch);
                        if !lost && instance.producer == Some((end.producer_id, end.producer_epoch))
                        {
                            self.instances[index].producer = Some((producer_id, producer_epoch));
                        }
                    }
                }
            }
            (answer, sent) => panic!("{answer:?} answers {sent:?}"),
        }
    }

    fn check_answered(&mut self, id: &str, producer_id: i64, producer_epoch: i16) {
        // The last epoch is never handed out, so the coordinator can always fence.
        assert!(
            (0..i16::MAX).contains(&producer_epoch),
            "{id}: epoch {producer_epoch} handed out"
        );
        let answered = (producer_id, producer_epoch);
        let highest = self
            .highest_answered
            .entry(id.to_owned())
            .or_insert(answered);
        assert!(
            answered >= *highest,
            "{id}: answered {answered:?} after {highest:?}"
        );
        *highest = answered;
    }

    /// The latest record of `id` in the log.
    fn latest_record(&self, id: &str) -> Option<TransactionLogValue> {
        self.log.iter().rev().find_map(|(key, value)| {
            let key = crate::transactions::log_format::decode_key(key.clone()).expect("our key");
            (key.transactional_id == id).then(|| {
                value
                    .clone()
                    .map(|value| decode_value(value).expect("our value"))
            })
        })?
    }

    /// Whether the log ever held a PrepareCommit of `id` by `producer_id` at one of `epochs`.
    fn prepared_commit(&self, id: &str, producer_id: i64, epochs: [i16; 2]) -> bool {
        self.log.iter().any(|(key, value)| {
            let key = crate::transactions::log_format::decode_key(key.clone()).expect("our key");
            let Some(value) = value else {
                return false;
            };
            let value = decode_value(value.clone()).expect("our value");
            key.transactional_id == id
                && value.transaction_status == TransactionState::PrepareCommit.id()
                && value.producer_id == producer_id
                && epochs.contains(&value.producer_epoch)
        })
    }

    fn check_markers(&mut self, markers: &TxnMarkers) {
        let id = markers.transactional_id.clone();
        // Markers go out only once their decision is the id's latest record.
        let prepared = match markers.result {
            TransactionResult::Commit => TransactionState::PrepareCommit,
            TransactionResult::Abort => TransactionState::PrepareAbort,
        };
        let latest = self.latest_record(&id);
        assert!(
            latest.as_ref().is_some_and(|value| {
                value.transaction_status == prepared.id()
                    && value.producer_id == markers.producer_id
                    && value.producer_epoch == markers.producer_epoch
            }),
            "markers {markers:?} do not match the latest record {latest:?}"
        );
        if markers.result != TransactionResult::Commit {
            return;
        }
        // V1 ends keep the epoch, V2 ends bump it by one.
        let asked_at = [
            markers.producer_epoch,
            markers.producer_epoch.wrapping_sub(1),
        ];
        let asked = asked_at.iter().find(|epoch| {
            self.commit_requests
                .contains(&(id.clone(), markers.producer_id, **epoch))
        });
        let Some(asked) = asked else {
            panic!("commit markers without an EndTxn(commit): {markers:?}");
        };
        let mut added = BTreeSet::new();
        for epoch in asked_at {
            if let Some(partitions) = self.added_by.get(&(id.clone(), markers.producer_id, epoch)) {
                added.extend(partitions.iter().cloned());
            }
        }
        for partition in &markers.partitions {
            assert!(
                added.contains(partition),
                "committed {partition:?} that producer {}/{asked} never added",
                markers.producer_id
            );
        }
    }

    fn check_state(&self) {
        // Epochs never go down in the records.
        let mut latest: BTreeMap<String, (i64, i16)> = BTreeMap::new();
        for (key, value) in &self.log {
            let id = crate::transactions::log_format::decode_key(key.clone())
                .expect("our key")
                .transactional_id;
            let Some(value) = value else {
                latest.remove(&id);
                continue;
            };
            let value = decode_value(value.clone()).expect("our value");
            let producer = (value.producer_id, value.producer_epoch);
            if let Some(before) = latest.insert(id.clone(), producer) {
                assert!(
                    producer >= before,
                    "{id}: record {producer:?} after {before:?}"
                );
            }
        }
        for metadata in self.coordinator.transactions() {
            if let Some(written) = latest.get(&metadata.transactional_id) {
                let live = (metadata.producer_id, metadata.producer_epoch);
                assert!(
                    live >= *written,
                    "{}: live {live:?} below its record {written:?}",
                    metadata.transactional_id
                );
            }
        }
        // Loading the records gives the live state.
        let (loaded, _) = TransactionCoordinator::load(
            self.coordinator.partition(),
            self.coordinator_epoch + 1,
            self.config.clone(),
            self.log.clone(),
            self.now,
        )
        .expect("the records load");
        let writing: BTreeSet<&str> = self
            .appends
            .iter()
            .map(|append| append.key.transactional_id.as_str())
            .collect();
        let ids: BTreeSet<&str> = self
            .coordinator
            .transactions()
            .map(|metadata| metadata.transactional_id.as_str())
            .chain(
                loaded
                    .transactions()
                    .map(|metadata| metadata.transactional_id.as_str()),
            )
            .collect();
        for id in ids {
            if writing.contains(id) {
                continue;
            }
            let live = self.coordinator.transaction(id);
            // Never written (its first record failed) or a V1 fence kept in memory.
            if live.is_some_and(|live| live.producer_epoch == -1 || live.has_failed_epoch_fence) {
                continue;
            }
            assert_eq!(
                live.map(persisted),
                loaded.transaction(id).map(persisted),
                "{id}: the records load to another state"
            );
        }
    }

    fn reload(&mut self, why: &str) {
        self.coordinator_epoch += 1;
        self.coverage.reloads += 1;
        let (coordinator, actions) = TransactionCoordinator::load(
            self.coordinator.partition(),
            self.coordinator_epoch,
            self.config.clone(),
            self.log.clone(),
            self.now,
        )
        .unwrap_or_else(|error| panic!("reload ({why}): {error}"));
        self.coordinator = coordinator;
        // Whatever the old coordinator had in flight is gone with it.
        self.in_flight.clear();
        self.appends.clear();
        self.markers.clear();
        self.take(actions);
    }

    fn crash(&mut self) {
        // Appends are sequential: some prefix of those in flight reached the log.
        let written = self.rng.random_range(0..=self.appends.len());
        for append in self.appends.drain(..written).collect::<Vec<_>>() {
            self.record(&append);
        }
        self.reload("crash");
    }

    fn record(&mut self, append: &LogAppend) {
        let key = Bytes::from(append.key_bytes().expect("key"));
        let value = append.value_bytes().expect("value").map(Bytes::from);
        self.log.push((key, value));
    }

    fn write_next_append(&mut self) {
        if self.appends.is_empty() {
            return;
        }
        let append = self.appends.remove(0);
        let fails = self.rng.random_bool(0.1);
        if !fails {
            self.record(&append);
            let actions = self
                .coordinator
                .append_completed(append.write_id, Ok(()), self.now);
            self.take(actions);
            return;
        }
        let error = [
            ErrorCode::NotEnoughReplicas,
            ErrorCode::RequestTimedOut,
            ErrorCode::NotLeaderOrFollower,
        ][self.rng.random_range(0..3)];
        let actions = self
            .coordinator
            .append_completed(append.write_id, Err(error), self.now);
        self.take(actions);
        if error == ErrorCode::NotLeaderOrFollower {
            // The partition moved away: its next leader loads it.
            self.crash();
        }
    }

    fn confirm_markers(&mut self, index: usize) {
        let markers = self.markers.remove(index);
        let actions = self.coordinator.markers_written(
            &markers.transactional_id,
            markers.producer_id,
            markers.producer_epoch,
        );
        self.take(actions);
    }

    fn client_step(&mut self) {
        let index = self.rng.random_range(0..self.instances.len());
        let instance = self.instances[index].clone();
        let choice = self.rng.random_range(0..100);
        let request = if choice < 8 {
            // A new instance of the id: a producer restarting elsewhere.
            let mut fresh = instance.clone();
            fresh.producer = None;
            fresh.fenced = false;
            fresh.last_request = None;
            self.instances.push(fresh);
            let timeout = self.rng.random_range(2_000..12_000);
            self.send(
                self.instances.len() - 1,
                Request::Init(InitProducerIdRequest {
                    transactional_id: instance.id.clone(),
                    transaction_timeout_ms: timeout,
                    expected: None,
                }),
            );
            return;
        } else if choice < 18 {
            // The same request again, late or duplicated.
            match instance.last_request {
                Some(request) => request,
                None => return,
            }
        } else if instance.producer.is_none() || choice < 24 {
            // (Re-)initialize; KIP-360 producers name the id and epoch they have.
            Request::Init(InitProducerIdRequest {
                transactional_id: instance.id.clone(),
                transaction_timeout_ms: self.rng.random_range(2_000..12_000),
                expected: instance.producer.map(|(producer_id, producer_epoch)| {
                    ProducerIdAndEpoch {
                        producer_id,
                        producer_epoch,
                    }
                }),
            })
        } else {
            let Some((producer_id, producer_epoch)) = instance.producer else {
                return;
            };
            if choice < 60 {
                let count = self.rng.random_range(1..=2);
                let partitions = (0..count)
                    .map(|_| {
                        TopicPartition::new(
                            TOPICS[self.rng.random_range(0..TOPICS.len())],
                            self.rng.random_range(0..3),
                        )
                    })
                    .collect();
                Request::Add(AddPartitionsRequest {
                    transactional_id: instance.id.clone(),
                    producer_id,
                    producer_epoch,
                    partitions,
                    client_version: instance.version,
                })
            } else if choice < 66 {
                Request::Offsets(AddOffsetsRequest {
                    transactional_id: instance.id.clone(),
                    producer_id,
                    producer_epoch,
                    group_id: GROUPS[self.rng.random_range(0..GROUPS.len())].to_owned(),
                })
            } else {
                let result = if self.rng.random_bool(0.6) {
                    TransactionResult::Commit
                } else {
                    TransactionResult::Abort
                };
                Request::End(EndTxnRequest {
                    transactional_id: instance.id.clone(),
                    producer_id,
                    producer_epoch,
                    result,
                    client_version: instance.version,
                })
            }
        };
        self.send(index, request);
    }

    fn step(&mut self) {
        match self.rng.random_range(0..100) {
            0..=39 => self.client_step(),
            40..=69 => self.write_next_append(),
            70..=82 => {
                if !self.markers.is_empty() {
                    let index = self.rng.random_range(0..self.markers.len());
                    self.confirm_markers(index);
                }
            }
            83..=96 => {
                self.now += self.rng.random_range(0..1_500);
                let actions = self.coordinator.tick(self.now);
                self.take(actions);
            }
            _ => self.crash(),
        }
        self.check_state();
    }

    /// Writes everything and confirms every marker, then checks nothing is left prepared.
    fn drain(&mut self) {
        for _ in 0..10_000 {
            if !self.appends.is_empty() {
                let append = self.appends.remove(0);
                self.record(&append);
                let actions = self
                    .coordinator
                    .append_completed(append.write_id, Ok(()), self.now);
                self.take(actions);
            } else if !self.markers.is_empty() {
                self.confirm_markers(0);
            } else {
                break;
            }
        }
        self.check_state();
        for metadata in self.coordinator.transactions() {
            assert!(
                !matches!(
                    metadata.state,
                    TransactionState::PrepareCommit | TransactionState::PrepareAbort
                ) && metadata.pending_state.is_none(),
                "left unfinished: {metadata:?}"
            );
        }
        assert_eq!(self.coordinator.appends_in_flight(), 0);
        assert_eq!(self.coordinator.markers_in_flight().count(), 0);
        for (id, producer_id, epoch, version) in &self.acknowledged_commits {
            // V1 keeps the epoch, V2 bumps it (also past the last one, to overflow).
            assert!(
                self.prepared_commit(id, *producer_id, [*epoch, epoch.wrapping_add(1)]),
                "{id}: commit by {producer_id}/{epoch} ({version:?}) acknowledged, never logged"
            );
        }
    }
}

/// What a record holds (the last epoch and pending state live in memory only).
fn persisted(metadata: &TransactionMetadata) -> impl PartialEq + std::fmt::Debug {
    (
        metadata.producer_id,
        metadata.previous_producer_id,
        metadata.next_producer_id,
        metadata.producer_epoch,
        metadata.timeout_ms,
        metadata.state,
        metadata.partitions.clone(),
        metadata.start_time_ms,
        metadata.last_update_time_ms,
        metadata.client_version,
    )
}

fn run(seed: u64, server_version: TransactionVersion, steps: usize) -> Coverage {
    let outcome = std::panic::catch_unwind(|| {
        let mut sim = Sim::new(seed, server_version);
        for _ in 0..steps {
            sim.step();
        }
        sim.drain();
        sim.coverage
    });
    match outcome {
        Ok(coverage) => coverage,
        Err(panic) => {
            eprintln!(
                "transaction coordinator simulation failed: KAAS_SIM_SEED={seed} ({server_version:?} broker)"
            );
            std::panic::resume_unwind(panic)
        }
    }
}

/// Runs every seed and checks the rare paths ran somewhere (unless one seed is replayed).
fn run_all(server_version: TransactionVersion, count: u64) {
    let mut total = Coverage::default();
    for seed in seeds(count) {
        let coverage = run(seed, server_version, 400);
        total.overflows += coverage.overflows;
        total.rotations += coverage.rotations;
        total.fenced_refusals += coverage.fenced_refusals;
        total.reloads += coverage.reloads;
        total.commits += coverage.commits;
    }
    if std::env::var("KAAS_SIM_SEED").is_err() {
        assert!(
            total.rotations > 0
                && total.fenced_refusals > 0
                && total.reloads > 0
                && total.commits > 0,
            "the simulation missed a path: {total:?}"
        );
        if server_version.supports_epoch_bump() {
            assert!(total.overflows > 0, "no V2 overflow: {total:?}");
        }
    }
}

fn seeds(count: u64) -> Vec<u64> {
    match std::env::var("KAAS_SIM_SEED") {
        Ok(seed) => vec![seed.parse().expect("KAAS_SIM_SEED is a number")],
        Err(_) => (0..count).map(|n| 0x7a5_0000 + n).collect(),
    }
}

#[test]
fn random_clients_crashes_and_reloads_keep_every_invariant() {
    run_all(TransactionVersion::V2, 300);
}

#[test]
fn a_v1_broker_keeps_every_invariant_too() {
    run_all(TransactionVersion::V1, 100);
}
