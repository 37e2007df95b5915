//! Actions and states written for a reader: one line each, as counterexample traces show them
//! in a CI log.

use std::fmt::Write as _;

use opledger_domain::witness::{Record, ReleaseEvidence};

use crate::endpoints::Evidence;
use crate::model::{Action, Planned, State, Task, Worker};
use crate::rogue::Rogue;

fn evidence(evidence: &Evidence) -> String {
    match evidence {
        Ok(r) => {
            let inclusions: Vec<String> = r
                .inclusions
                .iter()
                .map(|i| match i {
                    None => "-".to_owned(),
                    Some(i) => format!("#{}{}", i.block.number, if i.succeeded { "" } else { "!" }),
                })
                .collect();
            format!(
                "pinned #{} final #{} [{}] nonce {}/{}",
                r.pinned.number,
                r.final_block.number,
                inclusions.join(" "),
                r.nonce_at_pinned,
                r.nonce_at_final
            )
        }
        Err(e) => format!("no agreement ({e})"),
    }
}

/// A one-line description of an action.
pub fn describe(action: &Action) -> String {
    match action {
        Action::Evaluate {
            worker: Worker::Reconciler,
            evidence: e,
            clock,
        } => format!(
            "reconciler reads {} cancel_elapsed={} escalate_elapsed={}",
            evidence(e),
            clock.cancel_window_elapsed,
            clock.escalation_window_elapsed
        ),
        Action::Evaluate {
            worker: Worker::Watcher,
            evidence: e,
            ..
        } => format!("watcher reads {}", evidence(e)),
        Action::Webhook { evidence: e } => format!("webhook hint; watcher reads {}", evidence(e)),
        Action::Resolve {
            outcome,
            evidence: e,
        } => format!("operator asks {outcome:?}, reads {}", evidence(e)),
        Action::Attest {
            proposal,
            evidence: e,
        } => format!("witness reads {} about proposal {proposal}", evidence(e)),
        Action::Rogue(Rogue::Propose {
            principal,
            evidence: e,
        }) => format!(
            "compromised login records a proposal as {}: {}",
            principal.as_str(),
            release(e)
        ),
        Action::Rogue(Rogue::Attest(e)) => {
            format!("compromised login records an attestation: {}", release(e))
        }
        Action::Rogue(Rogue::Move { actor, state }) => {
            format!("compromised login moves the operation to {state} as {actor}")
        }
        Action::Rogue(Rogue::Release) => "compromised login asks the ledger to release".to_owned(),
        other => format!("{other:?}"),
    }
}

fn task(task: Task) -> String {
    match task {
        Task::Idle => "idle".to_owned(),
        Task::StoreRead { attempts } => format!("read {attempts} attempt(s)"),
        Task::Planned(plan) => match plan.step {
            Planned::Confirm { attempt, inclusion } => format!(
                "Confirm(attempt {attempt} at #{}) from {}",
                inclusion.block.number, plan.from
            ),
            Planned::Escalate(e) => format!("Escalate({}) from {}", e.reason_code, plan.from),
            Planned::Release(e) => format!("Release({}) from {}", release(&e), plan.from),
            Planned::ReopenRelease(e) => {
                format!("ReopenRelease({}) from {}", release(&e), plan.from)
            }
            step => format!("{step:?} from {}", plan.from),
        },
    }
}

/// Release evidence as `attempt <i> at #<block>/<hash prefix>` (`tx <hash prefix>` for a hash
/// of no attempt of the model).
fn release(evidence: &ReleaseEvidence) -> String {
    let tx = match crate::store::attempt_of(&evidence.tx_hash) {
        Some(i) => format!("attempt {i}"),
        None => format!("tx {}", hex(&evidence.tx_hash[..4])),
    };
    format!(
        "{tx} at #{}/{}",
        evidence.block.number,
        hex(&evidence.block.hash[1..7])
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

fn records(records: &[Record]) -> String {
    let listed: Vec<String> = records
        .iter()
        .map(|r| format!("{}:{}", r.principal.as_str(), release(&r.evidence)))
        .collect();
    listed.join(", ")
}

/// A one-line summary of a state.
pub fn brief(state: &State) -> String {
    let attempts: Vec<String> = state
        .store
        .attempts
        .iter()
        .map(|a| format!("{:?}/{:?}/{:?}", a.kind, a.content, a.sender))
        .collect();
    let mined = |m: Option<crate::chain::Mined>| match m {
        None => "-".to_owned(),
        Some(m) => format!(
            "{:?}@#{}{}",
            m.tx,
            m.block,
            if m.succeeded { "" } else { " reverted" }
        ),
    };
    let mut line = format!(
        "{} hold={:?} head=#{} nonceA={} nonceB={} attempts=[{}] watcher={} reconciler={}",
        state.store.state,
        state.store.hold,
        state.chain.height,
        mined(state.chain.a),
        mined(state.chain.b),
        attempts.join(", "),
        task(state.watcher),
        task(state.reconciler)
    );
    let store = &state.store;
    if !store.proposals.is_empty() {
        let refused: Vec<String> = store.refusals.iter().map(release).collect();
        let _ = write!(
            line,
            " proposals=[{}] attestations=[{}] refused=[{}]",
            records(&store.proposals),
            records(&store.attestations),
            refused.join(", ")
        );
    }
    if !store.reorged.is_empty() {
        let marked: Vec<String> = store.reorged.iter().map(release).collect();
        let _ = write!(line, " reorged=[{}]", marked.join(", "));
    }
    line
}
