//! The profile-independent part of a create call: counting the call, the faults that fire for
//! it, storing the operation once, starting its course, and twisting the answer (5xx, drop).

use std::sync::Arc;

use axum::response::Response;

use crate::app::App;
use crate::clock::Clock;
use crate::config::secs_ms;
use crate::executor::{self, Key, new_id, submitted};
use crate::faults::{DuplicateAnswer, Fault, Fired};
use crate::profile::{Endpoint, Profile};
use crate::record::{Operation, Outcome, Plan, Record, StoredAnswer, WebhookPlan};
use crate::reply::{self, DropMode, Note};

/// A create the provider found valid.
#[derive(Debug, Clone)]
pub struct Intake {
    /// Destination, lowercase.
    pub destination: String,
    /// Amount in wei.
    pub amount_wei: u128,
    /// Fireblocks' note.
    pub note: Option<String>,
}

/// One create call in progress.
#[derive(Debug)]
pub struct Flow {
    app: Arc<App>,
    /// The profile.
    pub profile: Profile,
    /// Our reference.
    pub reference: String,
    /// The request log's note.
    pub note: Note,
    fired: Vec<Fired>,
}

impl Flow {
    /// Counts the call; a `429` when a rate limit fires (nothing stored).
    pub fn begin(
        app: &Arc<App>,
        profile: Profile,
        reference: &str,
        mut note: Note,
    ) -> Result<Flow, Box<Response>> {
        note.reference = Some(reference.to_owned());
        let (_, fired) = app.shared.call(profile, reference, Endpoint::Create);
        if let Some((retry, label)) = rate_limit(&fired) {
            note.faults.push(label);
            return Err(Box::new(reply::rate_limited(profile, retry, note)));
        }
        Ok(Flow {
            app: app.clone(),
            profile,
            reference: reference.to_owned(),
            note,
            fired,
        })
    }

    /// The operation already stored for the reference.
    pub fn existing(&self) -> Option<Operation> {
        self.app.shared.op(self.profile, &self.reference)
    }

    /// The duplicate answer a fault imposes on this call, if one fires.
    pub fn duplicate_fault(&mut self) -> Option<DuplicateAnswer> {
        let fired = self.fired.iter().find_map(|f| match f.fault {
            Fault::Duplicate { answer } => Some((answer, f.label())),
            _ => None,
        });
        fired.map(|(answer, label)| {
            self.note.faults.push(label);
            answer
        })
    }

    /// Stores the operation (its first answer made by `answer`) and starts its course; gives
    /// the answer to send (5xx or withheld when a fault says so), or the operation stored first.
    pub fn accept(
        &mut self,
        intake: Intake,
        answer: impl FnOnce(&Operation) -> StoredAnswer,
    ) -> Result<StoredAnswer, Box<Operation>> {
        let app = &self.app;
        let now = app.now_ms();
        let plan = plan(&self.fired, self.profile);
        let lag = app.timing(self.profile).consistency_lag_ms;
        let mut op = Operation {
            profile: self.profile,
            reference: self.reference.clone(),
            destination: intake.destination,
            amount_wei: intake.amount_wei,
            note: intake.note,
            activity_id: uuid::Uuid::new_v4().to_string(),
            accepted_ms: now,
            accepted_real_ms: Clock::real_ms(),
            visible_from_ms: now.saturating_add(lag).saturating_add(plan.lookup_lag_ms),
            records: vec![Record::new(new_id(self.profile), submitted(now))],
            first_answer: StoredAnswer {
                status: 200,
                body: String::new(),
            },
            plan,
        };
        op.first_answer = answer(&op);
        let meant = op.first_answer.clone();
        let labels = op.plan.applied.clone();
        app.shared.insert(op)?;
        self.note.faults.extend(labels);
        let key = Key {
            profile: self.profile,
            reference: self.reference.clone(),
        };
        tokio::spawn(executor::run(app.clone(), key));
        Ok(self.twist(meant))
    }

    /// Fault 1 and 2 on the accepting call.
    fn twist(&mut self, meant: StoredAnswer) -> StoredAnswer {
        for fired in &self.fired {
            match fired.fault {
                Fault::ErrorAfterAccept { status } => {
                    self.note.faults.push(fired.label());
                    let status = if (500..600).contains(&status) {
                        status
                    } else {
                        500
                    };
                    return reply::error(self.profile, status, "Internal server error");
                }
                Fault::DropResponse { delay_ms } => {
                    self.note.faults.push(fired.label());
                    self.note.drop = Some(delay_ms.map_or(DropMode::Close, DropMode::Delay));
                    return meant;
                }
                _ => {}
            }
        }
        meant
    }

    /// The response of `answer`.
    pub fn respond(self, answer: &StoredAnswer) -> Response {
        reply::respond(answer, self.note)
    }
}

fn rate_limit(fired: &[Fired]) -> Option<(u64, String)> {
    fired.iter().find_map(|f| match f.fault {
        Fault::RateLimit {
            retry_after_secs, ..
        } => Some((retry_after_secs, f.label())),
        _ => None,
    })
}

/// What the rules that fired decide about the transfer's course.
pub fn plan(fired: &[Fired], profile: Profile) -> Plan {
    let mut plan = Plan::default();
    let mut outcome_set = false;
    for f in fired {
        let label = f.label();
        let outcome = match &f.fault {
            Fault::Reject {
                blocked,
                sub_status,
                hold_secs,
            } => Some(Outcome::Reject {
                blocked: *blocked,
                sub_status: sub_status.clone().unwrap_or_else(|| {
                    if *blocked {
                        "BLOCKED_BY_POLICY"
                    } else {
                        "REJECTED_BY_USER"
                    }
                    .to_owned()
                }),
                hold_ms: secs_ms(*hold_secs),
            }),
            Fault::FailedWithHash { variant } => Some(Outcome::Failed { variant: *variant }),
            Fault::Replacement => Some(Outcome::Replacement),
            Fault::Retried if profile == Profile::Prime => Some(Outcome::Retried),
            _ => None,
        };
        if let Some(outcome) = outcome {
            if !outcome_set {
                plan.outcome = outcome;
                plan.applied.push(label);
                outcome_set = true;
            }
            continue;
        }
        if webhook_or_lag(&mut plan, &f.fault) {
            plan.applied.push(label);
        }
    }
    plan
}

fn webhook_or_lag(plan: &mut Plan, fault: &Fault) -> bool {
    let hooks: &mut WebhookPlan = &mut plan.webhooks;
    match fault {
        Fault::LookupLag { secs } => plan.lookup_lag_ms = secs_ms(*secs),
        Fault::StatusLag { secs } => plan.status_lag_ms = secs_ms(*secs),
        Fault::WebhookDelay { secs } => hooks.delay_ms = secs_ms(*secs),
        Fault::WebhookDuplicate => hooks.duplicate = true,
        Fault::WebhookReorder => hooks.reorder = true,
        Fault::WebhookForged { variant } => hooks.forged = Some(*variant),
        Fault::WebhookReplay { after_secs } => hooks.replay_after_ms = Some(secs_ms(*after_secs)),
        _ => return false,
    }
    true
}

/// Counts a read for `reference` (empty for the Prime list); a `429` when a rate limit fires.
pub fn read_call(
    app: &App,
    profile: Profile,
    reference: &str,
    note: &mut Note,
) -> Result<(), Box<Response>> {
    let (_, fired) = app.shared.call(profile, reference, Endpoint::Lookup);
    match rate_limit(&fired) {
        Some((retry, label)) => {
            note.faults.push(label);
            Err(Box::new(reply::rate_limited(profile, retry, note.clone())))
        }
        None => Ok(()),
    }
}

/// Whether lookups find `op` now (consistency lag, fault 4).
pub fn visible(app: &App, op: &Operation) -> bool {
    app.now_ms() >= op.visible_from_ms
}
