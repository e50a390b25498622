//! Spreading things (partitions, groups) evenly over brokers while moving as few as possible.
//!
//! With `m` things and `n` brokers, an even spread (loads at most one apart) gives `r = m mod
//! n` brokers `⌈m/n⌉` things and the others `⌊m/n⌋`: any even spread has exactly these loads.
//! Things whose current broker is alive are *kept* there as far as the loads allow; the
//! larger quotas go to the brokers keeping the most (ties to the lower id). A broker keeping
//! more than its quota sheds the excess, and the shed things plus the *orphans* (new, or
//! whose broker left) fill the brokers below their quota.
//!
//! This moves the fewest kept things any even spread can: a spread keeps at most
//! `Σ min(kept_b, quota_b)` of them, and giving the larger quotas to the largest `kept_b` is
//! what maximises that sum (swapping two brokers' quotas against that order never raises
//! it). So a departure moves only the departed broker's things (the others keep theirs, the
//! quotas only grow), a join moves only what the joiner's quota takes from the most loaded,
//! and adding things moves nothing that was placed.
//!
//! Things come in *families* (a partition's topic): a broker sheds from the family it holds
//! most of, and an orphan goes to the broker with the fewest of its family, so one topic's
//! partitions spread too. That choice never changes how many move.

use std::collections::{BTreeMap, BTreeSet};

use crate::ids::BrokerId;

/// Places every thing of `kept` (broker → things currently there, brokers all alive) and
/// `orphans` on one of `brokers` (not empty), evenly; `family` names a thing's family.
pub(crate) fn spread<T, F>(
    brokers: &BTreeSet<BrokerId>,
    mut kept: BTreeMap<BrokerId, Vec<T>>,
    mut orphans: Vec<T>,
    family: impl Fn(&T) -> F,
) -> BTreeMap<T, BrokerId>
where
    T: Ord + Clone,
    F: Ord + Clone,
{
    let total = kept.values().map(Vec::len).sum::<usize>() + orphans.len();
    let quotas = quotas(brokers, &kept, total);
    for (broker, quota) in &quotas {
        if let Some(things) = kept.get_mut(broker) {
            while things.len() > *quota {
                let shed = shed_one(things, &family);
                orphans.push(shed);
            }
        }
    }
    let mut placed: BTreeMap<T, BrokerId> = BTreeMap::new();
    let mut load: BTreeMap<BrokerId, usize> = BTreeMap::new();
    let mut family_load: BTreeMap<(BrokerId, F), usize> = BTreeMap::new();
    for (broker, things) in kept {
        load.insert(broker, things.len());
        for thing in things {
            *family_load.entry((broker, family(&thing))).or_default() += 1;
            placed.insert(thing, broker);
        }
    }
    orphans.sort();
    for thing in orphans {
        let thing_family = family(&thing);
        let chosen = quotas
            .iter()
            .filter(|(broker, quota)| load.get(broker).copied().unwrap_or(0) < **quota)
            .map(|(broker, _)| *broker)
            .min_by_key(|broker| {
                let same = family_load
                    .get(&(*broker, thing_family.clone()))
                    .copied()
                    .unwrap_or(0);
                (same, load.get(broker).copied().unwrap_or(0), *broker)
            });
        // The quotas add up to the number of things, so a broker with room always exists.
        let Some(broker) = chosen else {
            unreachable!("quotas sum to the total, so some broker is below its quota")
        };
        *load.entry(broker).or_default() += 1;
        *family_load.entry((broker, thing_family)).or_default() += 1;
        placed.insert(thing, broker);
    }
    placed
}

/// Each broker's quota: `⌈total/n⌉` for the `total mod n` brokers keeping the most, else
/// `⌊total/n⌋`.
fn quotas<T>(
    brokers: &BTreeSet<BrokerId>,
    kept: &BTreeMap<BrokerId, Vec<T>>,
    total: usize,
) -> BTreeMap<BrokerId, usize> {
    let n = brokers.len().max(1);
    let (base, larger) = (total / n, total % n);
    let mut order: Vec<BrokerId> = brokers.iter().copied().collect();
    order.sort_by_key(|broker| {
        let keeps = kept.get(broker).map_or(0, Vec::len);
        (std::cmp::Reverse(keeps), *broker)
    });
    order
        .into_iter()
        .enumerate()
        .map(|(rank, broker)| (broker, base + usize::from(rank < larger)))
        .collect()
}

/// Removes and returns one thing of the family `things` hold most of (the greatest such
/// thing, so the choice is deterministic).
fn shed_one<T: Ord + Clone, F: Ord>(things: &mut Vec<T>, family: &impl Fn(&T) -> F) -> T {
    let mut counts: BTreeMap<F, usize> = BTreeMap::new();
    for thing in things.iter() {
        *counts.entry(family(thing)).or_default() += 1;
    }
    let (index, _) = things
        .iter()
        .enumerate()
        .max_by(|(_, a), (_, b)| {
            let (fa, fb) = (family(a), family(b));
            (counts.get(&fa), *a).cmp(&(counts.get(&fb), *b))
        })
        .unwrap_or_else(|| unreachable!("only called on a broker above its quota"));
    things.swap_remove(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brokers(ids: &[i32]) -> BTreeSet<BrokerId> {
        ids.iter().map(|id| BrokerId(*id)).collect()
    }

    fn loads(placed: &BTreeMap<u32, BrokerId>) -> BTreeMap<BrokerId, usize> {
        let mut loads = BTreeMap::new();
        for broker in placed.values() {
            *loads.entry(*broker).or_default() += 1;
        }
        loads
    }

    #[test]
    fn orphans_fill_the_emptiest_and_kept_things_stay() {
        let kept = BTreeMap::from([(BrokerId(0), vec![1, 2, 3]), (BrokerId(1), vec![4])]);
        let placed = spread(&brokers(&[0, 1, 2]), kept, vec![5, 6], |_| ());
        assert_eq!(
            loads(&placed).values().copied().collect::<Vec<_>>(),
            [2, 2, 2]
        );
        // Only one of broker 0's three had to move.
        let stayed = [1, 2, 3]
            .iter()
            .filter(|t| placed[t] == BrokerId(0))
            .count();
        assert_eq!(stayed, 2);
        assert_eq!(placed[&4], BrokerId(1));
    }

    #[test]
    fn the_larger_quotas_go_to_the_brokers_keeping_most() {
        let kept = BTreeMap::from([(BrokerId(0), vec![1]), (BrokerId(1), vec![2, 3])]);
        let placed = spread(&brokers(&[0, 1, 2]), kept, vec![4], |_| ());
        assert_eq!((placed[&2], placed[&3]), (BrokerId(1), BrokerId(1)));
        assert_eq!(placed[&1], BrokerId(0));
        assert_eq!(placed[&4], BrokerId(2));
    }

    #[test]
    fn orphans_spread_within_their_family() {
        let placed = spread(
            &brokers(&[0, 1]),
            BTreeMap::new(),
            vec![10, 11, 20, 21],
            |t| t / 10,
        );
        assert_ne!(placed[&10], placed[&11]);
        assert_ne!(placed[&20], placed[&21]);
    }
}
