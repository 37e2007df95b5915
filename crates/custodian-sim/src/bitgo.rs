//! The `one_send_per_reference` profile: BitGo `sendcoins` with `sequenceId`, and the transfer
//! lookup by `sequenceId`.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::{get, post};
use http::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::accept::{Flow, Intake, read_call, visible};
use crate::amount::{from_base, is_address};
use crate::app::App;
use crate::config::BitgoConfig;
use crate::faults::DuplicateAnswer;
use crate::profile::Profile;
use crate::record::{Operation, StoredAnswer};
use crate::reply::{Note, answer, bitgo_error, error, respond};

/// The profile's routes.
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/api/v2/{coin}/wallet/{wallet}/sendcoins", post(send))
        .route(
            "/api/v2/{coin}/wallet/{wallet}/transfer/sequenceId/{sequence_id}",
            get(lookup),
        )
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SendBody {
    address: String,
    amount: Value,
    sequence_id: String,
    #[serde(default)]
    wallet_passphrase: Option<String>,
}

/// The configuration when the call carries its token and names its wallet.
fn admit<'a>(
    app: &'a App,
    headers: &HeaderMap,
    coin: &str,
    wallet: &str,
) -> Result<&'a BitgoConfig, StoredAnswer> {
    let config = app
        .config
        .bitgo
        .as_ref()
        .ok_or_else(|| bitgo_error(404, "not found", "NotFound"))?;
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if token != Some(config.access_token.as_str()) {
        return Err(bitgo_error(401, "unauthorized", "Unauthorized"));
    }
    if coin != config.coin || wallet != config.wallet_id {
        return Err(bitgo_error(404, "wallet not found", "NotFound"));
    }
    Ok(config)
}

async fn send(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    path: Result<Path<(String, String)>, PathRejection>,
    body: Bytes,
) -> Response {
    let note = Note::of(Profile::Bitgo);
    let Ok(Path((coin, wallet))) = path else {
        return respond(&error(Profile::Bitgo, 400, "invalid path"), note);
    };
    let config = match admit(&app, &headers, &coin, &wallet) {
        Ok(config) => config,
        Err(refused) => return respond(&refused, note),
    };
    let request: SendBody = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => {
            return respond(
                &bitgo_error(400, &format!("invalid body: {e}"), "InvalidRequest"),
                note,
            );
        }
    };
    if request.sequence_id.is_empty() {
        return respond(
            &bitgo_error(400, "sequenceId is empty", "InvalidRequest"),
            note,
        );
    }
    let mut flow = match Flow::begin(&app, Profile::Bitgo, &request.sequence_id, note) {
        Ok(flow) => flow,
        Err(limited) => return *limited,
    };
    let sent = decide(&app, config, &mut flow, &request).await;
    flow.respond(&sent)
}

async fn decide(
    app: &App,
    config: &BitgoConfig,
    flow: &mut Flow,
    request: &SendBody,
) -> StoredAnswer {
    if let Some(existing) = flow.existing() {
        let how = flow.duplicate_fault().unwrap_or(DuplicateAnswer::Reject);
        return duplicate(how, &existing);
    }
    let intake = match validate(app, config, request).await {
        Ok(intake) => intake,
        Err(refused) => return refused,
    };
    let views = app.views();
    let accepted = flow.accept(intake, |op| match op.records.first() {
        Some(record) => {
            let transfer = views.record(op, record, record.current());
            let state = transfer.get("state").cloned().unwrap_or_default();
            answer(200, &json!({"transfer": transfer, "status": state}))
        }
        None => bitgo_error(500, "no transfer", "InternalServerError"),
    });
    accepted.unwrap_or_else(|existing| {
        let how = flow.duplicate_fault().unwrap_or(DuplicateAnswer::Reject);
        duplicate(how, &existing)
    })
}

fn duplicate(how: DuplicateAnswer, existing: &Operation) -> StoredAnswer {
    const NOT_UNIQUE: &str = "sequenceId is not unique";
    match how {
        DuplicateAnswer::Reject => bitgo_error(400, NOT_UNIQUE, "DuplicateSequenceIdError"),
        DuplicateAnswer::Conflict => bitgo_error(409, NOT_UNIQUE, "DuplicateSequenceIdError"),
        DuplicateAnswer::Replay => existing.first_answer.clone(),
        DuplicateAnswer::AfterError => bitgo_error(
            400,
            "sequenceId was already used by a request that failed",
            "SequenceIdUsedWithError",
        ),
    }
}

async fn validate(
    app: &App,
    config: &BitgoConfig,
    request: &SendBody,
) -> Result<Intake, StoredAnswer> {
    let refuse = |message: &str, name: &str| Err(bitgo_error(400, message, name));
    if request.wallet_passphrase.as_deref() != Some(config.wallet_passphrase.as_str()) {
        return refuse("incorrect wallet passphrase", "IncorrectPassphraseError");
    }
    if !is_address(&request.address) {
        return refuse("invalid address", "InvalidAddressError");
    }
    let amount = match &request.amount {
        Value::String(text) => from_base(text),
        Value::Number(number) => number.as_u64().map(u128::from),
        _ => None,
    };
    let Some(amount_wei) = amount.filter(|a| *a > 0) else {
        return refuse("invalid amount", "InvalidAmountError");
    };
    match app.chain.balance().await {
        Ok(balance) if balance >= amount_wei => Ok(Intake {
            destination: request.address.to_ascii_lowercase(),
            amount_wei,
            note: None,
        }),
        Ok(_) => refuse("insufficient balance", "InsufficientBalanceError"),
        Err(_) => Err(bitgo_error(
            503,
            "service unavailable",
            "ServiceUnavailable",
        )),
    }
}

async fn lookup(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    path: Result<Path<(String, String, String)>, PathRejection>,
) -> Response {
    let mut note = Note::of(Profile::Bitgo);
    let Ok(Path((coin, wallet, sequence_id))) = path else {
        return respond(&error(Profile::Bitgo, 400, "invalid path"), note);
    };
    if let Err(refused) = admit(&app, &headers, &coin, &wallet) {
        return respond(&refused, note);
    }
    note.reference = Some(sequence_id.clone());
    if let Err(limited) = read_call(&app, Profile::Bitgo, &sequence_id, &mut note) {
        return *limited;
    }
    let found = app
        .shared
        .op(Profile::Bitgo, &sequence_id)
        .filter(|op| visible(&app, op));
    let shown = found.as_ref().and_then(|op| {
        let (record, snap) = op.shown(app.now_ms())?;
        Some(app.views().record(op, record, snap))
    });
    match shown {
        Some(view) => respond(&answer(200, &view), note),
        None => respond(&bitgo_error(404, "transfer not found", "NotFound"), note),
    }
}
