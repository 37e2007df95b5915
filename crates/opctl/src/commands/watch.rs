//! `watch`: polls GetWithdrawal until a final or settled state and keeps the timeline of the state
//! changes it saw (polling can miss a state that lasted less than one interval).

use crate::cli::WatchArgs;
use crate::client::Session;
use crate::error::{Done, Failure, Kind};
use crate::output::{Output, Report, elapsed, now, rfc3339};
use crate::states::{Final, final_kind, state_name};
use opledger_proto::v1 as pb;
use prost_types::Timestamp;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::time::Instant;

/// One state change as observed.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The wire state.
    pub state: i32,
    /// The withdrawal's version when seen.
    pub version: i64,
    /// When opctl saw it.
    pub observed_at: Timestamp,
    /// When the service says the withdrawal entered it (its update time).
    pub entered_at: Option<Timestamp>,
    /// Since the watch started.
    pub elapsed: Duration,
}

/// How a watch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// A final or settled state.
    Final(Final),
    /// --until-timeout elapsed.
    TimedOut,
    /// --until-timeout elapsed while the service could not be reached.
    Unreachable,
}

impl End {
    fn outcome(self) -> &'static str {
        match self {
            End::Final(Final::Wanted) => "confirmed",
            End::Final(Final::Unwanted) => "unwanted_final_state",
            End::TimedOut => "timed_out",
            End::Unreachable => "unreachable",
        }
    }

    fn done(self) -> Done {
        match self {
            End::Final(Final::Wanted) => Done::Ok,
            End::Final(Final::Unwanted) => Done::UnwantedFinalState,
            End::TimedOut => Done::WatchTimedOut,
            End::Unreachable => Done::WatchUnreachable,
        }
    }
}

/// The state changes of one withdrawal.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    id: String,
    changes: Vec<Change>,
}

impl Timeline {
    /// An empty timeline for withdrawal `id`.
    pub fn new(id: &str) -> Timeline {
        Timeline {
            id: id.to_owned(),
            changes: Vec::new(),
        }
    }

    /// Records `w` as seen at `observed_at`; the new change when its state differs from the
    /// last one seen.
    pub fn observe(
        &mut self,
        w: &pb::Withdrawal,
        observed_at: Timestamp,
        elapsed: Duration,
    ) -> Option<Change> {
        if self.changes.last().map(|c| c.state) == Some(w.state) {
            return None;
        }
        let change = Change {
            state: w.state,
            version: w.version,
            observed_at,
            entered_at: w.update_time,
            elapsed,
        };
        self.changes.push(change.clone());
        Some(change)
    }

    /// The state seen last.
    pub fn last_state(&self) -> Option<i32> {
        self.changes.last().map(|c| c.state)
    }

    fn change_fields(c: &Change) -> Value {
        json!({
            "state": state_name(c.state),
            "version": c.version,
            "observed_at": rfc3339(&c.observed_at),
            "entered_at": c.entered_at.as_ref().map(rfc3339),
            "elapsed_ms": u64::try_from(c.elapsed.as_millis()).unwrap_or(u64::MAX),
        })
    }

    /// A state change as one JSON line.
    pub fn change_json(&self, c: &Change) -> Value {
        let mut value = json!({"event": "state_change", "withdrawal_id": self.id});
        if let (Value::Object(map), Value::Object(fields)) = (&mut value, Self::change_fields(c)) {
            map.extend(fields);
        }
        value
    }

    /// A state change as one line of text.
    pub fn change_line(c: &Change) -> String {
        format!(
            "{}  +{:<7} {} (version {})",
            rfc3339(&c.observed_at),
            elapsed(c.elapsed),
            state_name(c.state),
            c.version
        )
    }

    /// The one-line live display.
    pub fn progress_line(&self, since_start: Duration) -> String {
        format!(
            "{}  {}  {}",
            self.id,
            self.last_state()
                .map_or_else(|| "...".to_owned(), state_name),
            elapsed(since_start)
        )
    }

    /// The final result: outcome, last state and the whole timeline.
    pub fn summary(&self, end: End, total: Duration) -> Report {
        let last = self.last_state().map(state_name);
        let headline = match (end, &last) {
            (End::Final(Final::Wanted), Some(s)) => format!("final state {s}"),
            (End::Final(Final::Unwanted), Some(s)) => {
                format!("ended in unwanted final state {s}")
            }
            (End::Unreachable, _) => {
                "gave up: the operations service could not be reached".to_owned()
            }
            (_, Some(s)) => format!("timed out in state {s}"),
            (_, None) => "timed out before the first answer".to_owned(),
        };
        let mut text = format!(
            "{} {headline} after {}\ntimeline:\n",
            self.id,
            elapsed(total)
        );
        for c in &self.changes {
            text.push_str(&format!(
                "  {}  entered {}\n",
                Self::change_line(c),
                c.entered_at
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), rfc3339)
            ));
        }
        Report {
            text,
            json: json!({
                "event": "result",
                "withdrawal_id": self.id,
                "outcome": end.outcome(),
                "final_state": match end {
                    End::Final(_) => last.clone().map_or(Value::Null, Value::String),
                    _ => Value::Null,
                },
                "last_state": last,
                "elapsed_ms": u64::try_from(total.as_millis()).unwrap_or(u64::MAX),
                "timeline": self.changes.iter().map(Self::change_fields).collect::<Vec<_>>(),
            }),
        }
    }
}

pub async fn watch(session: &Session, out: &Output, args: &WatchArgs) -> Result<Done, Failure> {
    let mut client = session.operations().await?;
    let started = Instant::now();
    let deadline = args
        .until_timeout
        .map(|secs| started + Duration::from_secs(secs));
    let interval = Duration::from_millis(args.interval_ms);
    let live = out.tty && !out.json;
    let mut timeline = Timeline::new(&args.id);
    let mut last_error: Option<Failure> = None;
    let end = loop {
        let call = client.get_withdrawal(session.request(pb::GetWithdrawalRequest {
            withdrawal_id: args.id.clone(),
        }));
        let answer = match deadline {
            Some(at) => tokio::time::timeout_at(at, call).await.ok(),
            None => Some(call.await),
        };
        match answer {
            None => {}
            Some(Ok(response)) => {
                last_error = None;
                let w = response.into_inner();
                if let Some(change) = timeline.observe(&w, now(), started.elapsed()) {
                    if out.json {
                        out.json_line(&timeline.change_json(&change));
                    } else if !live {
                        out.text(&Timeline::change_line(&change));
                    }
                }
                if let Some(kind) = final_kind(w.state) {
                    break End::Final(kind);
                }
            }
            Some(Err(status)) => {
                let failure = Failure::from_status("operations", &status);
                if failure.kind != Kind::Transient {
                    if live {
                        out.progress("");
                    }
                    return Err(failure);
                }
                if last_error.is_none() {
                    if live {
                        out.progress("");
                    }
                    out.note(&format!(
                        "{}: {} (still watching)",
                        failure.reason, failure.message
                    ));
                }
                last_error = Some(failure);
            }
        }
        if live {
            out.progress(&timeline.progress_line(started.elapsed()));
        }
        let next = Instant::now() + interval;
        match deadline {
            Some(at) if Instant::now() >= at => {
                break if last_error.is_some() {
                    End::Unreachable
                } else {
                    End::TimedOut
                };
            }
            Some(at) => tokio::time::sleep_until(next.min(at)).await,
            None => tokio::time::sleep_until(next).await,
        }
    };
    if live {
        out.text("");
    }
    out.report(&timeline.summary(end, started.elapsed()));
    Ok(end.done())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(state: pb::WithdrawalState, version: i64) -> pb::Withdrawal {
        pb::Withdrawal {
            withdrawal_id: "w".into(),
            state: state as i32,
            version,
            update_time: Some(Timestamp {
                seconds: 1_800_000_000 + version,
                nanos: 0,
            }),
            ..Default::default()
        }
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp {
            seconds: 1_800_000_000 + secs,
            nanos: 500_000_000,
        }
    }

    fn confirmed_timeline() -> Timeline {
        let mut t = Timeline::new("w");
        assert!(
            t.observe(
                &seen(pb::WithdrawalState::Approved, 2),
                at(0),
                Duration::ZERO
            )
            .is_some()
        );
        assert!(
            t.observe(
                &seen(pb::WithdrawalState::Approved, 2),
                at(1),
                Duration::from_secs(1)
            )
            .is_none(),
            "same state: no change"
        );
        assert!(
            t.observe(
                &seen(pb::WithdrawalState::Broadcast, 5),
                at(2),
                Duration::from_millis(2_100)
            )
            .is_some()
        );
        t.observe(
            &seen(pb::WithdrawalState::Confirmed, 6),
            at(3),
            Duration::from_millis(3_200),
        );
        t
    }

    #[test]
    fn the_timeline_keeps_changes_only() {
        let t = confirmed_timeline();
        assert_eq!(t.changes.len(), 3);
        assert_eq!(t.last_state(), Some(pb::WithdrawalState::Confirmed as i32));
        let c = &t.changes[1];
        assert_eq!(
            Timeline::change_line(c),
            "2027-01-15T08:00:02.500Z  +2.1s    BROADCAST (version 5)"
        );
        let v = t.change_json(c);
        assert_eq!(v["event"], "state_change");
        assert_eq!(v["withdrawal_id"], "w");
        assert_eq!(v["state"], "BROADCAST");
        assert_eq!(v["entered_at"], "2027-01-15T08:00:05Z");
        assert_eq!(v["elapsed_ms"], 2_100);
    }

    #[test]
    fn summaries_name_the_outcome_and_the_timeline() {
        let t = confirmed_timeline();
        let r = t.summary(End::Final(Final::Wanted), Duration::from_millis(3_300));
        assert_eq!(r.json["outcome"], "confirmed");
        assert_eq!(r.json["final_state"], "CONFIRMED");
        let states: Vec<&str> = r.json["timeline"]
            .as_array()
            .map(|a| a.iter().filter_map(|c| c["state"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(states, ["APPROVED", "BROADCAST", "CONFIRMED"]);
        assert!(
            r.text
                .starts_with("w final state CONFIRMED after 3.3s\ntimeline:\n")
        );
        assert_eq!(r.text.lines().count(), 5);

        let r = t.summary(End::TimedOut, Duration::from_secs(60));
        assert_eq!(r.json["outcome"], "timed_out");
        assert_eq!(r.json["final_state"], Value::Null);
        assert_eq!(r.json["last_state"], "CONFIRMED");
        let empty = Timeline::new("x").summary(End::TimedOut, Duration::from_secs(1));
        assert!(empty.text.contains("timed out before the first answer"));
        assert_eq!(empty.json["last_state"], Value::Null);
    }

    #[test]
    fn ends_map_to_exit_codes() {
        assert_eq!(End::Final(Final::Wanted).done().exit_code(), 0);
        assert_eq!(End::Final(Final::Unwanted).done().exit_code(), 4);
        assert_eq!(End::TimedOut.done().exit_code(), 5);
        assert_eq!(End::Unreachable.done().exit_code(), 3);
    }

    #[test]
    fn the_live_line_shows_state_and_elapsed() {
        let t = confirmed_timeline();
        assert_eq!(
            t.progress_line(Duration::from_millis(4_000)),
            "w  CONFIRMED  4.0s"
        );
        assert_eq!(
            Timeline::new("w").progress_line(Duration::ZERO),
            "w  ...  0ms"
        );
    }
}
