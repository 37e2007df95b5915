//! The double's own surface, `/sim/*`: health, transfers on chain, the request log, the clock,
//! the fault schedule, webhook keys, events and replays, and the stored operations.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use axum::routing::{get, post};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::app::App;
use crate::config::secs_ms;
use crate::faults::Schedule;
use crate::reply::{Note, answer, respond};

/// The `/sim/*` routes.
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/sim/health", get(health))
        .route("/sim/transfers", get(transfers))
        .route("/sim/requests", get(requests))
        .route("/sim/operations", get(operations))
        .route("/sim/clock", get(clock).post(advance))
        .route("/sim/faults", get(faults).post(set_faults))
        .route("/sim/webhook-keys/rotate", post(rotate))
        .route("/sim/webhooks", get(webhooks))
        .route("/sim/webhooks/replay", post(replay))
}

fn ok(body: &Value) -> Response {
    respond(&answer(200, body), Note::default())
}

fn bad(status: u16, message: &str) -> Response {
    respond(&answer(status, &json!({"error": message})), Note::default())
}

fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, Box<Response>> {
    let body = if body.is_empty() {
        b"{}".as_slice()
    } else {
        body
    };
    serde_json::from_slice(body).map_err(|e| Box::new(bad(400, &format!("invalid body: {e}"))))
}

fn to_json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

async fn health(State(app): State<Arc<App>>) -> Response {
    ok(&json!({
        "status": "ok",
        "hot_wallet": app.hot_wallet(),
        "chain_id": app.config.chain.chain_id,
        "now_ms": app.now_ms(),
        "profiles": {
            "fireblocks": app.config.fireblocks.is_some(),
            "bitgo": app.config.bitgo.is_some(),
            "prime": app.config.prime.is_some(),
        },
    }))
}

async fn transfers(State(app): State<Arc<App>>) -> Response {
    ok(&to_json(&app.shared.transfers()))
}

async fn requests(State(app): State<Arc<App>>) -> Response {
    ok(&to_json(&app.shared.requests()))
}

async fn operations(State(app): State<Arc<App>>) -> Response {
    let views = app.views();
    let ops: Vec<Value> = app
        .shared
        .ops(None)
        .iter()
        .map(|op| {
            let shown: Vec<Value> = op
                .records
                .iter()
                .map(|r| views.record(op, r, r.current()))
                .collect();
            let mut value = to_json(op);
            if let Some(map) = value.as_object_mut() {
                map.insert("amount_wei".to_owned(), json!(op.amount_wei.to_string()));
                map.insert("views".to_owned(), json!(shown));
            }
            value
        })
        .collect();
    ok(&json!(ops))
}

async fn clock(State(app): State<Arc<App>>) -> Response {
    let clock = &app.shared.clock;
    ok(&json!({"now_ms": clock.now_ms(), "offset_ms": clock.offset()}))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Advance {
    advance_secs: f64,
}

async fn advance(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let advance: Advance = match parse(&body) {
        Ok(advance) => advance,
        Err(refused) => return *refused,
    };
    if !advance.advance_secs.is_finite() || advance.advance_secs < 0.0 {
        return bad(
            400,
            "advance_secs must be a number of seconds, not negative",
        );
    }
    app.shared
        .clock
        .advance((advance.advance_secs * 1000.0).round() as i64);
    clock(State(app)).await
}

async fn faults(State(app): State<Arc<App>>) -> Response {
    ok(&to_json(&app.shared.schedule()))
}

async fn set_faults(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let schedule: Schedule = match parse(&body) {
        Ok(schedule) => schedule,
        Err(refused) => return *refused,
    };
    if schedule
        .rules
        .iter()
        .any(|r| !(0.0..=1.0).contains(&r.rate))
    {
        return bad(400, "rate must be in [0, 1]");
    }
    let rules = schedule.rules.len();
    app.shared.set_schedule(schedule);
    ok(&json!({"rules": rules}))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rotate {
    #[serde(default)]
    overlap_secs: Option<u64>,
}

async fn rotate(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let request: Rotate = match parse(&body) {
        Ok(request) => request,
        Err(refused) => return *refused,
    };
    let Some(ring) = &app.keys else {
        return bad(404, "the fireblocks profile is not configured");
    };
    let overlap = request.overlap_secs.map_or(ring.overlap_ms, secs_ms);
    match ring.rotate(app.now_ms(), overlap).await {
        Ok((kid, previous)) => ok(&json!({
            "kid": kid,
            "previous_kid": previous,
            "previous_listed_until_ms": app.now_ms().saturating_add(overlap),
        })),
        Err(e) => bad(500, &format!("{e:#}")),
    }
}

async fn webhooks(State(app): State<Arc<App>>) -> Response {
    ok(&to_json(&app.hub.events()))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Replay {
    event_id: String,
}

async fn replay(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let request: Replay = match parse(&body) {
        Ok(request) => request,
        Err(refused) => return *refused,
    };
    if app.hub.replay(&request.event_id) {
        ok(&json!({"replayed": request.event_id}))
    } else {
        bad(404, "no such event")
    }
}
