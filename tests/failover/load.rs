//! Clients under load: withdrawal clients (create, then approve, each retried with the same
//! idempotency key and the same signed statement until answered) and webhook senders (each event
//! redelivered with its id until a 2xx), all recording what they were told and when.

use crate::system::System;
use opledger_proto::v1 as pb;
use opledger_tests::authed;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tonic::Code;

/// How long a client keeps retrying one call that gets no answer.
const RETRY_FOR: Duration = Duration::from_secs(90);

/// An acknowledged withdrawal.
#[derive(Debug, Clone)]
pub struct Op {
    /// Destination (lowercase).
    pub to: String,
    /// Amount in wei.
    pub amount: u128,
    /// The approval was acknowledged.
    pub approved: bool,
}

/// Which write a client made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Write {
    /// CreateWithdrawal that stored a new operation.
    Create,
    /// ApproveWithdrawal that recorded the approval.
    Approve,
    /// A webhook delivery that stored a new event.
    Webhook,
}

/// What every client did and was told.
#[derive(Debug, Default)]
pub struct Tally {
    /// Acknowledged operations by id.
    pub ops: BTreeMap<String, Op>,
    /// Idempotency keys sent (each until answered).
    pub keys: u64,
    /// Acknowledged webhooks: event id -> deposit id.
    pub webhooks: BTreeMap<String, String>,
    /// Amounts of the deposits sent: deposit id -> amount.
    pub deposit_amounts: BTreeMap<String, u128>,
    /// Calls that got no answer at least once (transport error, UNAVAILABLE, INTERNAL, 5xx).
    pub ambiguous: BTreeMap<Write, u64>,
    /// Of those, the retry found the effect already there (replayed, already approved,
    /// duplicate): the lost answer's commit had happened.
    pub ambiguous_happened: BTreeMap<Write, u64>,
    /// Answers by gRPC code or HTTP status while retrying, for the summary.
    pub unanswered: BTreeMap<String, u64>,
    /// Committed writes: (kind, when the successful attempt was sent, when it was answered),
    /// fresh effects only.
    pub commits: Vec<(Write, Instant, Instant)>,
}

/// Shared between the clients.
pub type Shared = Arc<Mutex<Tally>>;

fn lock(tally: &Shared) -> std::sync::MutexGuard<'_, Tally> {
    tally
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

enum Outcome<T> {
    /// Answered; `already` when the effect had happened before this call.
    Done { value: T, already: bool },
    /// No answer: the outcome is unknown, retry the same request.
    Unanswered(String),
    /// A definite refusal: a bug under this load.
    Refused(String),
}

fn from_status<T>(status: &tonic::Status) -> Outcome<T> {
    match status.code() {
        Code::Unavailable
        | Code::Unknown
        | Code::Internal
        | Code::Cancelled
        | Code::DeadlineExceeded
        | Code::Aborted => Outcome::Unanswered(format!("grpc {:?}", status.code())),
        Code::Ok
        | Code::InvalidArgument
        | Code::NotFound
        | Code::AlreadyExists
        | Code::PermissionDenied
        | Code::ResourceExhausted
        | Code::FailedPrecondition
        | Code::OutOfRange
        | Code::Unimplemented
        | Code::DataLoss
        | Code::Unauthenticated => Outcome::Refused(format!(
            "{:?} {}: {}",
            status.code(),
            opledger_tests::reason(status),
            status.message()
        )),
    }
}

/// Repeats `call` until answered, for up to [`RETRY_FOR`], recording ambiguity and the commit.
async fn until_answered<T, F, Fut>(tally: &Shared, kind: Write, mut call: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Outcome<T>>,
{
    let deadline = Instant::now() + RETRY_FOR;
    let mut uncertain = false;
    loop {
        let sent = Instant::now();
        match call().await {
            Outcome::Done { value, already } => {
                let mut t = lock(tally);
                if uncertain {
                    *t.ambiguous.entry(kind).or_default() += 1;
                    if already {
                        *t.ambiguous_happened.entry(kind).or_default() += 1;
                    }
                }
                if !already {
                    t.commits.push((kind, sent, Instant::now()));
                }
                return Ok(value);
            }
            Outcome::Refused(e) => anyhow::bail!("{kind:?} refused: {e}"),
            Outcome::Unanswered(e) => {
                anyhow::ensure!(
                    Instant::now() < deadline,
                    "{kind:?}: no answer for {RETRY_FOR:?}: {e}"
                );
                uncertain = true;
                *lock(tally).unanswered.entry(e).or_default() += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Creates a withdrawal with a fresh key and approves it, each retried until answered.
async fn withdraw(sys: &System, tally: &Shared, amount: u128, to: &str) -> anyhow::Result<()> {
    let key = uuid::Uuid::new_v4().to_string();
    lock(tally).keys += 1;
    let request = pb::CreateWithdrawalRequest {
        idempotency_key: key,
        payload: Some(opledger_tests::payload(&amount.to_string(), to)),
    };
    let w = until_answered(tally, Write::Create, || async {
        let mut client = match sys.operations() {
            Ok(c) => c,
            Err(e) => return Outcome::Unanswered(e.to_string()),
        };
        match client
            .create_withdrawal(authed(&sys.acme.client, request.clone()))
            .await
        {
            Ok(answer) => {
                let answer = answer.into_inner();
                match answer.withdrawal {
                    Some(w) => Outcome::Done {
                        value: w,
                        already: answer.replayed,
                    },
                    None => Outcome::Refused("no withdrawal in the answer".into()),
                }
            }
            Err(status) => from_status(&status),
        }
    })
    .await?;
    lock(tally).ops.insert(
        w.withdrawal_id.clone(),
        Op {
            to: to.to_owned(),
            amount,
            approved: false,
        },
    );
    // One signed statement, sent again as it is until answered.
    let approval = opledger_tests::approval(sys.acme.id, &w, 0);
    until_answered(tally, Write::Approve, || async {
        let mut client = match sys.approvals() {
            Ok(c) => c,
            Err(e) => return Outcome::Unanswered(e.to_string()),
        };
        match client
            .approve_withdrawal(authed(&sys.acme.approver, approval.clone()))
            .await
        {
            Ok(answer) => Outcome::Done {
                value: (),
                already: answer.into_inner().already_approved,
            },
            Err(status) => from_status(&status),
        }
    })
    .await?;
    if let Some(op) = lock(tally).ops.get_mut(&w.withdrawal_id) {
        op.approved = true;
    }
    Ok(())
}

/// Delivers one deposit webhook until a 2xx.
async fn deposit(sys: &System, tally: &Shared, amount: u128) -> anyhow::Result<()> {
    let event = format!("msg_{}", uuid::Uuid::new_v4().simple());
    let deposit = format!("dep-{}", uuid::Uuid::new_v4().simple());
    let body = opledger_tests::inbox::deposit(&deposit, "treasury", "ETH", &amount.to_string());
    until_answered(tally, Write::Webhook, || async {
        match sys.sender.send(&sys.endpoint, &event, &body).await {
            Ok((200, text)) => Outcome::Done {
                value: (),
                already: text.contains("\"duplicate\""),
            },
            Ok((status, _)) if status >= 500 => Outcome::Unanswered(format!("http {status}")),
            Ok((status, text)) => Outcome::Refused(format!("http {status}: {text}")),
            Err(_) => Outcome::Unanswered("http transport".into()),
        }
    })
    .await?;
    let mut tally = lock(tally);
    tally.deposit_amounts.insert(deposit.clone(), amount);
    tally.webhooks.insert(event, deposit);
    Ok(())
}

/// Runs `withdrawers` withdrawal clients and `senders` webhook senders until `stop` is set,
/// each pausing `pace` between its calls. Returns the first client error, if any.
pub async fn run(
    sys: &System,
    tally: &Shared,
    stop: &AtomicBool,
    seed: u64,
    destinations: &[String],
    (withdrawers, senders): (usize, usize),
    pace: Duration,
) -> anyhow::Result<()> {
    let mut clients = Vec::new();
    for i in 0..withdrawers {
        clients.push(futures::future::Either::Left(async move {
            let mut rng = StdRng::seed_from_u64(seed ^ (i as u64 + 1));
            while !stop.load(Ordering::Relaxed) {
                let amount = u128::from(rng.random_range(1_000_u32..1_000_000)) * 1_000_000_000;
                let to = &destinations[rng.random_range(0..destinations.len())];
                withdraw(sys, tally, amount, to).await?;
                tokio::time::sleep(pace).await;
            }
            anyhow::Ok(())
        }));
    }
    for i in 0..senders {
        clients.push(futures::future::Either::Right(async move {
            let mut rng = StdRng::seed_from_u64(seed ^ (0x100 + i as u64));
            while !stop.load(Ordering::Relaxed) {
                let amount = u128::from(rng.random_range(1_000_u32..1_000_000)) * 1_000_000_000;
                deposit(sys, tally, amount).await?;
                tokio::time::sleep(pace).await;
            }
            anyhow::Ok(())
        }));
    }
    for result in futures::future::join_all(clients).await {
        result?;
    }
    Ok(())
}
