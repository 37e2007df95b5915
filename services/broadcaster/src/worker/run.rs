//! The run loop ([`Broadcaster::run`]): keeps up to `concurrency` operations in flight, each
//! tenant within its share of the slots, reading the fair queue again as it is used up.

use super::Broadcaster;
use opledger_domain::ids::{OperationId, TenantId};
use opledger_store::StoreError;
use opledger_store::queue::Queued;
use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// The most often [`Broadcaster::run`] reads the queue again while its local copy still holds
/// operations (each read ranks every due operation).
pub const REFRESH: Duration = Duration::from_millis(200);

/// How long [`Broadcaster::run`] lets operations in flight finish once told to stop.
pub const DRAIN: Duration = Duration::from_secs(5);

/// The operations [`Broadcaster::run`] has in flight, by task, operation and tenant.
#[derive(Debug, Default)]
struct InFlight {
    by_task: HashMap<tokio::task::Id, (OperationId, TenantId)>,
    ops: HashSet<OperationId>,
    per_tenant: HashMap<TenantId, usize>,
}

impl InFlight {
    fn contains(&self, op: OperationId) -> bool {
        self.ops.contains(&op)
    }

    fn start(&mut self, task: tokio::task::Id, op: OperationId, tenant: TenantId) {
        self.by_task.insert(task, (op, tenant));
        self.ops.insert(op);
        *self.per_tenant.entry(tenant).or_default() += 1;
    }

    fn finish(&mut self, task: tokio::task::Id) {
        let Some((op, tenant)) = self.by_task.remove(&task) else {
            return;
        };
        self.ops.remove(&op);
        if let Some(n) = self.per_tenant.get_mut(&tenant) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_tenant.remove(&tenant);
            }
        }
    }

    /// Where in `queue` the next operation to start is: the first one not in flight whose tenant
    /// holds fewer than its share of the `concurrency` slots. The slots are shared equally by the
    /// tenants with work queued or in flight, so a tenant alone may use them all, and one
    /// tenant's slow or refused calls (which also occupy the signer's connections) never take
    /// every slot from another tenant's withdrawals.
    fn next(&self, queue: &VecDeque<Queued>, concurrency: usize) -> Option<usize> {
        let tenants: HashSet<TenantId> = queue
            .iter()
            .map(|q| q.due.tenant_id)
            .chain(self.per_tenant.keys().copied())
            .collect();
        let share = fair_share(concurrency, tenants.len());
        queue.iter().position(|q| {
            !self.ops.contains(&q.due.op_id)
                && self.per_tenant.get(&q.due.tenant_id).copied().unwrap_or(0) < share
        })
    }
}

/// How often [`Broadcaster::run`] reads the queue again while a slot is free: every `poll` when
/// its local copy is used up, at most every [`REFRESH`] (or `poll`, if longer) while it still
/// holds operations, so that another tenant's new withdrawal is seen without a full read per
/// finished operation.
fn refresh_after(poll: Duration, queue: &VecDeque<Queued>) -> Duration {
    if queue.is_empty() {
        poll
    } else {
        poll.max(REFRESH)
    }
}

/// Each tenant's share of `concurrency` slots among `tenants` (rounded up, at least one).
fn fair_share(concurrency: usize, tenants: usize) -> usize {
    concurrency.div_ceil(tenants.max(1)).max(1)
}

impl Broadcaster {
    /// Works until `stop` resolves, keeping up to `concurrency` operations in flight: whenever
    /// one finishes, the next due one starts, each tenant within its share of the slots while
    /// others have work. Due operations come from the fair queue, read again when the local copy
    /// is used up (at once if the last read was a full batch, else after `poll`) and every
    /// `poll` or [`REFRESH`], whichever is longer, while it is not; so a tenant's new
    /// withdrawal waits for one such read and one free slot, never for a whole pass of another
    /// tenant's slow refusals. On `stop` it starts nothing more and lets what is in flight finish
    /// for up to [`DRAIN`].
    pub async fn run(
        &self,
        batch: u32,
        concurrency: usize,
        poll: Duration,
        stop: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(stop);
        let concurrency = concurrency.max(1);
        // Each operation is worked on in its own task, so reading the queue never holds up the
        // operations in flight; `in_flight` keeps one from being started twice and each tenant
        // within its share of the slots.
        let mut running: JoinSet<()> = JoinSet::new();
        let mut in_flight = InFlight::default();
        let mut queue: VecDeque<Queued> = VecDeque::new();
        // When the queue was last read, and whether it had more than one batch to give.
        let mut read: Option<(Instant, bool)> = None;
        loop {
            if running.len() < concurrency {
                let stale = read.is_none_or(|(at, more)| {
                    at.elapsed() >= refresh_after(poll, &queue) || (more && queue.is_empty())
                });
                if stale {
                    let due = tokio::select! {
                        () = &mut stop => break,
                        due = self.store.next_due(batch) => due,
                    };
                    let more = refill(&mut queue, due, batch, &in_flight);
                    read = Some((Instant::now(), more));
                }
                self.start_next(&mut running, &mut in_flight, &mut queue, concurrency);
            }
            let next_read = read.map_or(Duration::ZERO, |(at, _)| {
                refresh_after(poll, &queue).saturating_sub(at.elapsed())
            });
            tokio::select! {
                () = &mut stop => break,
                Some(done) = running.join_next_with_id(), if !running.is_empty() => {
                    in_flight.finish(finished_task(done));
                }
                () = tokio::time::sleep(next_read), if running.len() < concurrency => {}
            }
        }
        drain(running).await;
    }

    /// Starts the next operations of `queue` while a slot is free, each in its own task, each
    /// tenant within its share of the slots.
    fn start_next(
        &self,
        running: &mut JoinSet<()>,
        in_flight: &mut InFlight,
        queue: &mut VecDeque<Queued>,
        concurrency: usize,
    ) {
        while running.len() < concurrency {
            let Some(queued) = in_flight
                .next(queue, concurrency)
                .and_then(|at| queue.remove(at))
            else {
                break;
            };
            let (op_id, tenant_id) = (queued.due.op_id, queued.due.tenant_id);
            let worker = self.clone();
            let task = running.spawn(async move {
                worker.work(&queued).await;
            });
            in_flight.start(task.id(), op_id, tenant_id);
        }
    }
}

/// Replaces `queue` with what a read of the fair queue gave (without what is in flight); whether
/// the read was a full batch that left operations to start (so the next read is due at once when
/// they are used up).
fn refill(
    queue: &mut VecDeque<Queued>,
    due: Result<Vec<Queued>, StoreError>,
    batch: u32,
    in_flight: &InFlight,
) -> bool {
    match due {
        Ok(due) => {
            let full = due.len() >= usize::try_from(batch).unwrap_or(usize::MAX);
            *queue = due
                .into_iter()
                .filter(|q| !in_flight.contains(q.due.op_id))
                .collect();
            full && !queue.is_empty()
        }
        Err(e) => {
            tracing::warn!(error = %e.log_safe(), "cannot read due operations");
            queue.clear();
            false
        }
    }
}

/// The id of a task that ended, logging a task that failed.
fn finished_task(done: Result<(tokio::task::Id, ()), tokio::task::JoinError>) -> tokio::task::Id {
    match done {
        Ok((id, ())) => id,
        Err(e) => {
            tracing::error!(error = %e, "broadcast task failed");
            e.id()
        }
    }
}

/// Lets what is in flight finish for up to [`DRAIN`], then aborts what is left.
async fn drain(mut running: JoinSet<()>) {
    let drained = tokio::time::timeout(DRAIN, async {
        while running.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!("stopped with operations still in flight");
        running.abort_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opledger_domain::state::OperationState;
    use opledger_store::broadcast::Due;

    fn queued(tenant: TenantId) -> Queued {
        Queued {
            due: Due {
                tenant_id: tenant,
                op_id: OperationId::new(),
                state: OperationState::Approved,
                network: "anvil".into(),
            },
            failures: 0,
        }
    }

    /// Starts what [`InFlight::next`] picks until it picks nothing; the tenants started, in order.
    fn fill(
        in_flight: &mut InFlight,
        queue: &mut VecDeque<Queued>,
        concurrency: usize,
    ) -> Vec<TenantId> {
        let mut started = Vec::new();
        while in_flight.ops.len() < concurrency {
            let Some(at) = in_flight.next(queue, concurrency) else {
                break;
            };
            let Some(q) = queue.remove(at) else { break };
            in_flight.start(task_id(), q.due.op_id, q.due.tenant_id);
            started.push(q.due.tenant_id);
        }
        started
    }

    /// A fresh task id (ids come only from the runtime, unique in the process).
    fn task_id() -> tokio::task::Id {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(async { tokio::spawn(async {}).id() })
    }

    #[test]
    fn each_tenant_gets_an_equal_share_of_the_slots_and_one_alone_gets_them_all() {
        assert_eq!(fair_share(8, 0), 8);
        assert_eq!(fair_share(8, 1), 8);
        assert_eq!(fair_share(8, 2), 4);
        assert_eq!(fair_share(8, 3), 3);
        assert_eq!(fair_share(8, 9), 1);
        assert_eq!(fair_share(16, 8), 2);
        assert_eq!(fair_share(0, 3), 1);
    }

    #[test]
    fn a_tenant_with_many_due_operations_leaves_slots_to_another() {
        let (a, b) = (TenantId::new(), TenantId::new());
        // a's eight come first in the queue, b's one last.
        let mut queue: VecDeque<Queued> = (0..8).map(|_| queued(a)).collect();
        queue.push_back(queued(b));
        let mut in_flight = InFlight::default();
        let started = fill(&mut in_flight, &mut queue, 8);
        assert_eq!(
            started,
            [a, a, a, a, b],
            "a stops at its share, b is not left behind"
        );
        assert_eq!(queue.len(), 4);

        // Alone, a tenant may use every slot.
        let mut alone: VecDeque<Queued> = (0..10).map(|_| queued(a)).collect();
        let mut in_flight = InFlight::default();
        assert_eq!(fill(&mut in_flight, &mut alone, 8).len(), 8);
    }

    #[test]
    fn an_operation_in_flight_is_never_started_again_and_a_finished_slot_is_reused() {
        let a = TenantId::new();
        let first = queued(a);
        let mut in_flight = InFlight::default();
        let task = task_id();
        in_flight.start(task, first.due.op_id, a);
        let queue: VecDeque<Queued> = VecDeque::from([first.clone()]);
        assert_eq!(in_flight.next(&queue, 8), None, "already in flight");
        in_flight.finish(task);
        assert!(!in_flight.contains(first.due.op_id));
        assert_eq!(in_flight.next(&queue, 8), Some(0));
        assert!(in_flight.per_tenant.is_empty());
    }
}
