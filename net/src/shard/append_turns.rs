//! Turns for appending to a partition: batches reach a partition's log in the order their
//! requests reached the owner shard.
//!
//! A connection's requests run concurrently, and one Produce request appends its partitions
//! one after the other, so without turns a later request can overtake an earlier one on a
//! partition while the earlier one still waits on another partition (its first open, a roll,
//! the append lock). Kafka handles a connection's requests one at a time, and an idempotent
//! producer with several requests in flight relies on that order. A request takes a ticket
//! for each of its partitions synchronously, before its first await, which runs in the order
//! the requests arrived (a connection's handlers are spawned in order, and a shard's inbox
//! spawns hopped work in order); it then appends each partition when its ticket is the
//! oldest one left for that partition.
//!
//! Tickets are taken all at once per request and each request only waits for older
//! tickets, so no two requests wait for each other. A dropped ticket (its request failed
//! or its connection closed) frees its turn. Memory is one entry per partition with a
//! ticket outstanding, removed when its last ticket is done.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use kaas_engine::PartitionId;

/// One shard's partitions' turns. `!Send`: lives on its shard.
#[derive(Default)]
pub struct AppendTurns {
    lines: Rc<RefCell<HashMap<PartitionId, Line>>>,
}

/// The tickets of one partition.
#[derive(Default)]
struct Line {
    /// The number the next ticket gets.
    issued: u64,
    /// Every ticket below this number is done; this one's holder may append.
    serving: u64,
    /// Tickets done before their turn (their request gave up), skipped when reached.
    done_early: BTreeSet<u64>,
    /// The wakers of tickets whose holders wait for their turn.
    waiting: HashMap<u64, Waker>,
}

impl AppendTurns {
    /// Takes the next ticket for `partition` (no await: call it before the request's first).
    pub fn take(&self, partition: &PartitionId) -> Ticket {
        let mut lines = self.lines.borrow_mut();
        let line = lines.entry(partition.clone()).or_default();
        let number = line.issued;
        line.issued += 1;
        Ticket {
            lines: self.lines.clone(),
            partition: partition.clone(),
            number,
        }
    }

    /// Partitions with a ticket outstanding (for tests).
    pub fn partitions_waiting(&self) -> usize {
        self.lines.borrow().len()
    }
}

/// The right to append to one partition after every older ticket of that partition is done.
/// Dropping it ends its turn.
pub struct Ticket {
    lines: Rc<RefCell<HashMap<PartitionId, Line>>>,
    partition: PartitionId,
    number: u64,
}

impl Ticket {
    /// Waits until every older ticket of the partition is done.
    pub fn turn(&self) -> Turn<'_> {
        Turn { ticket: self }
    }
}

/// The future of [`Ticket::turn`].
pub struct Turn<'a> {
    ticket: &'a Ticket,
}

impl Future for Turn<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let ticket = self.ticket;
        let mut lines = ticket.lines.borrow_mut();
        let Some(line) = lines.get_mut(&ticket.partition) else {
            // Unreachable while the ticket lives (its line outlives it); do not block.
            return Poll::Ready(());
        };
        if line.serving == ticket.number {
            line.waiting.remove(&ticket.number);
            return Poll::Ready(());
        }
        line.waiting.insert(ticket.number, cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut lines = self.lines.borrow_mut();
        let Some(line) = lines.get_mut(&self.partition) else {
            return;
        };
        if self.number != line.serving {
            line.done_early.insert(self.number);
            line.waiting.remove(&self.number);
            return;
        }
        line.serving += 1;
        while line.done_early.remove(&line.serving) {
            line.serving += 1;
        }
        if line.serving == line.issued {
            lines.remove(&self.partition);
            return;
        }
        let next = line.waiting.remove(&line.serving);
        drop(lines);
        if let Some(waker) = next {
            waker.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;

    fn partition(index: i32) -> PartitionId {
        PartitionId::new("t", index)
    }

    /// Runs each ticket's turn as its own task (spawned newest first, each holding its turn
    /// across a sleep); returns the names in the order the turns finished.
    async fn finish_order(tickets: Vec<(usize, Ticket)>) -> Vec<usize> {
        let order = Rc::new(RefCell::new(Vec::new()));
        let tasks: Vec<_> = tickets
            .into_iter()
            .rev()
            .map(|(name, ticket)| {
                let done = order.clone();
                glommio::spawn_local(async move {
                    ticket.turn().await;
                    // Sleep while holding the turn: nobody may overtake meanwhile.
                    glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
                    done.borrow_mut().push(name);
                })
            })
            .collect();
        for task in tasks {
            task.await;
        }
        let finished = order.borrow().clone();
        finished
    }

    fn on_executor(
        test: impl FnOnce() -> std::pin::Pin<Box<dyn Future<Output = ()>>> + Send + 'static,
    ) {
        glommio::LocalExecutorBuilder::default()
            .spawn(test)
            .expect("executor")
            .join()
            .expect("join");
    }

    #[test]
    fn tickets_of_one_partition_are_served_in_the_order_taken() {
        on_executor(|| {
            Box::pin(async {
                let turns = AppendTurns::default();
                let tickets = (0..5).map(|i| (i, turns.take(&partition(0)))).collect();
                assert_eq!(finish_order(tickets).await, vec![0, 1, 2, 3, 4]);
                assert_eq!(
                    turns.partitions_waiting(),
                    0,
                    "a line goes with its last ticket"
                );
            })
        });
    }

    #[test]
    fn a_dropped_ticket_frees_its_turn() {
        on_executor(|| {
            Box::pin(async {
                let turns = AppendTurns::default();
                let first = turns.take(&partition(0));
                let second = turns.take(&partition(0));
                let third = turns.take(&partition(0));
                let fourth = turns.take(&partition(0));
                drop(second);
                let order = finish_order(vec![(3, third), (4, fourth), (1, first)]).await;
                assert_eq!(order, vec![1, 3, 4]);
                assert_eq!(turns.partitions_waiting(), 0);
            })
        });
    }

    #[test]
    fn partitions_do_not_wait_for_each_other() {
        on_executor(|| {
            Box::pin(async {
                let turns = AppendTurns::default();
                let held = turns.take(&partition(0));
                let other = turns.take(&partition(1));
                // Partition 1's turn comes although partition 0's ticket is still held.
                assert_eq!(finish_order(vec![(1, other)]).await, vec![1]);
                assert_eq!(turns.partitions_waiting(), 1);
                drop(held);
                assert_eq!(turns.partitions_waiting(), 0);
            })
        });
    }
}
