//! Property: whatever a broker had open, and in whatever order its shards carry out each
//! phase's commands, running the takeover plan leaves open exactly what the new assignment
//! gives the broker, no partition or group is ever open on two shards at once, and a close
//! checkpoints exactly the partitions the broker keeps.

mod support;

use std::collections::BTreeMap;

use kaas_cluster::command::AddressedCommand;
use kaas_cluster::ids::{BrokerId, GroupId, ShardIndex, TopicName, TopicPartition};
use kaas_cluster::takeover::plan_takeover;
use kaas_cluster::view::ClusterView;
use proptest::prelude::*;
use support::{assignment_of, expected, random_shape, Rng, ShardModel, GROUP_POOL, TOPIC_POOL};

/// A plausible "open now": what the old view gave the broker, disturbed by failed opens,
/// orphans, partitions on the wrong shard or at the wrong epoch, and adopted unnamed groups.
fn disturbed_state(rng: &mut Rng, old: Option<&ClusterView>, shards: usize) -> ShardModel {
    let mut model = match old {
        Some(view) => {
            let adopted: Vec<GroupId> = GROUP_POOL.iter().map(|g| GroupId::new(g)).collect();
            expected(view, &adopted)
        }
        None => ShardModel::default(),
    };
    model.partitions.retain(|_, _| !rng.chance(15));
    for places in model.partitions.values_mut() {
        if rng.chance(15) {
            places[0].0 = ShardIndex(rng.below(shards as u64) as usize);
        }
        if rng.chance(15) {
            places[0].1 .0 += 1 + rng.below(2) as i32;
        }
    }
    for _ in 0..rng.below(4) {
        let name = *rng.pick(&TOPIC_POOL[..]);
        let topic = TopicName::new(name).expect("legal");
        let partition = TopicPartition::new(topic, rng.below(6) as i32);
        let place = (
            ShardIndex(rng.below(shards as u64) as usize),
            kaas_cluster::ids::LeaderEpoch(rng.below(6) as i32),
        );
        model
            .partitions
            .entry(partition)
            .or_insert_with(|| vec![place]);
    }
    for group in GROUP_POOL {
        if rng.chance(20) {
            let shard = ShardIndex(rng.below(shards as u64) as usize);
            model
                .groups
                .entry(GroupId::new(group))
                .or_insert_with(|| vec![shard]);
        }
    }
    model
}

fn run(seed: u64) -> Result<(), String> {
    let mut rng = Rng::new(seed);
    let me = BrokerId(rng.below(4) as i32);
    let shards = 1 + rng.below(4) as usize;
    let old = rng
        .chance(80)
        .then(|| ClusterView::new(&assignment_of(&random_shape(&mut rng, 4), 1, 1), me, shards));
    let new = ClusterView::new(&assignment_of(&random_shape(&mut rng, 4), 1, 2), me, shards);
    let mut model = disturbed_state(&mut rng, old.as_ref(), shards);
    let adopted_before: Vec<GroupId> = model.groups.keys().cloned().collect();

    let plan = plan_takeover(old.as_ref(), &new, &model.to_open_state());
    // A close checkpoints exactly when the new view keeps the partition on this broker (the
    // open phase reopens it here); what another broker takes over is handed over as the
    // files stand.
    let kept_here = new.partitions_led_by(me);
    for planned in plan.phases()[0].commands() {
        if let kaas_cluster::command::ShardCommand::ClosePartition {
            partition,
            checkpoint,
        } = &planned.command.command
        {
            let kept = kept_here.contains(partition);
            if *checkpoint != kept {
                return Err(format!(
                    "close of {partition}: checkpoint {checkpoint}, kept here {kept}"
                ));
            }
        }
    }
    for phase in plan.phases() {
        // Documented order: by shard, then partitions before groups.
        let order: Vec<(ShardIndex, bool)> = phase
            .commands()
            .iter()
            .map(|p| {
                let is_group = matches!(
                    p.command.command,
                    kaas_cluster::command::ShardCommand::AdoptGroup { .. }
                        | kaas_cluster::command::ShardCommand::DropGroup { .. }
                );
                (p.command.shard, is_group)
            })
            .collect();
        if order.windows(2).any(|w| w[0] > w[1]) {
            return Err(format!("phase out of order: {order:?}"));
        }
    }
    for (index, phase) in plan.phases().into_iter().enumerate() {
        let mut commands: Vec<AddressedCommand> =
            phase.commands().iter().map(|p| p.command.clone()).collect();
        rng.shuffle(&mut commands);
        for command in &commands {
            let closing = matches!(
                command.command,
                kaas_cluster::command::ShardCommand::ClosePartition { .. }
                    | kaas_cluster::command::ShardCommand::DropGroup { .. }
            );
            if closing != (index == 0) {
                return Err(format!("phase {index} holds {command:?}"));
            }
            model.apply(command)?;
        }
    }
    let want = expected(&new, &adopted_before);
    if model != want {
        return Err(format!("converged to {model:?}\nwanted {want:?}"));
    }
    let again = plan_takeover(Some(&new), &new, &model.to_open_state());
    if !again.is_empty() {
        return Err(format!("a converged broker is given more to do: {again:?}"));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn takeover_converges_without_double_opens(seed in any::<u64>()) {
        if let Err(message) = run(seed) {
            return Err(TestCaseError::fail(format!("seed {seed}: {message}")));
        }
    }
}

#[test]
fn a_state_with_a_partition_on_two_shards_is_repaired() {
    let me = BrokerId(0);
    let mut rng = Rng::new(7);
    let shape = random_shape(&mut rng, 1);
    let new = ClusterView::new(&assignment_of(&shape, 1, 1), me, 3);
    let partition = new.partitions_led_by(me)[0].clone();
    let placement = *new.leader_of(&partition).expect("exists");
    let mut model = ShardModel::default();
    let other = ShardIndex((placement.owner_shard.0 + 1) % 3);
    model.partitions.insert(
        partition,
        vec![
            (placement.owner_shard, placement.leader_epoch),
            (other, placement.leader_epoch),
        ],
    );
    let plan = plan_takeover(None, &new, &model.to_open_state());
    let closes: BTreeMap<_, _> = plan.close_phase().by_shard();
    assert_eq!(closes.keys().copied().collect::<Vec<_>>(), vec![other]);
}
