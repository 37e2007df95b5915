//! The `no_lookup` profile: Coinbase Prime withdrawals (`idempotency_key`, replayed) and the
//! portfolio's transaction list, the only way back.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::DateTime;
use http::{HeaderMap, Method, Uri};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::accept::{Flow, Intake, read_call, visible};
use crate::amount::{from_whole, is_address, to_whole};
use crate::app::App;
use crate::clock::Clock;
use crate::config::PrimeConfig;
use crate::faults::DuplicateAnswer;
use crate::hmac_sha;
use crate::profile::Profile;
use crate::record::{Operation, StoredAnswer};
use crate::reply::{Note, answer, error, prime_error, respond};

/// How far a request's timestamp may be from the double's real time.
const MAX_SKEW_SECS: i64 = 30;

/// The profile's routes.
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route(
            "/v1/portfolios/{portfolio}/wallets/{wallet}/withdrawals",
            post(withdraw),
        )
        .route("/v1/portfolios/{portfolio}/transactions", get(list))
        .route(
            "/v1/portfolios/{portfolio}/transactions/{transaction}",
            get(one),
        )
}

#[derive(Debug, Deserialize)]
struct WithdrawBody {
    amount: String,
    destination_type: String,
    idempotency_key: String,
    currency_symbol: String,
    #[serde(default)]
    blockchain_address: Option<BlockchainAddress>,
}

#[derive(Debug, Deserialize)]
struct BlockchainAddress {
    address: String,
}

/// The configuration when the call is signed and names the portfolio.
fn admit<'a>(
    app: &'a App,
    request: (&Method, &Uri, &HeaderMap, &[u8]),
    portfolio: &str,
) -> Result<&'a PrimeConfig, StoredAnswer> {
    let (method, uri, headers, body) = request;
    let config = app
        .config
        .prime
        .as_ref()
        .ok_or_else(|| prime_error(404, "not found"))?;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let unauthorized = || prime_error(401, "unauthorized");
    if header("x-cb-access-key") != Some(config.access_key.as_str())
        || header("x-cb-access-passphrase") != Some(config.passphrase.as_str())
    {
        return Err(unauthorized());
    }
    let timestamp = header("x-cb-access-timestamp").ok_or_else(unauthorized)?;
    let seconds: i64 = timestamp.parse().map_err(|_| unauthorized())?;
    if (Clock::real_ms() / 1000)
        .saturating_sub(seconds)
        .saturating_abs()
        > MAX_SKEW_SECS
    {
        return Err(unauthorized());
    }
    let signature = header("x-cb-access-signature")
        .and_then(|s| STANDARD.decode(s).ok())
        .ok_or_else(unauthorized)?;
    let path = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    let parts = [
        timestamp.as_bytes(),
        method.as_str().as_bytes(),
        path.as_bytes(),
        body,
    ];
    if !hmac_sha::verify(config.signing_secret.as_bytes(), &parts, &signature) {
        return Err(unauthorized());
    }
    if portfolio != config.portfolio_id {
        return Err(prime_error(404, "portfolio not found"));
    }
    Ok(config)
}

async fn withdraw(
    State(app): State<Arc<App>>,
    (method, uri, headers): (Method, Uri, HeaderMap),
    path: Result<Path<(String, String)>, PathRejection>,
    body: Bytes,
) -> Response {
    let note = Note::of(Profile::Prime);
    let Ok(Path((portfolio, wallet))) = path else {
        return respond(&error(Profile::Prime, 400, "invalid path"), note);
    };
    let config = match admit(&app, (&method, &uri, &headers, &body), &portfolio) {
        Ok(config) => config,
        Err(refused) => return respond(&refused, note),
    };
    if wallet != config.wallet_id {
        return respond(&prime_error(404, "wallet not found"), note);
    }
    let request: WithdrawBody = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => return respond(&prime_error(400, &format!("invalid body: {e}")), note),
    };
    if request.idempotency_key.is_empty() {
        return respond(&prime_error(400, "idempotency_key is empty"), note);
    }
    let mut flow = match Flow::begin(&app, Profile::Prime, &request.idempotency_key, note) {
        Ok(flow) => flow,
        Err(limited) => return *limited,
    };
    let sent = decide(&app, config, &mut flow, &request);
    flow.respond(&sent)
}

fn decide(
    app: &App,
    config: &PrimeConfig,
    flow: &mut Flow,
    request: &WithdrawBody,
) -> StoredAnswer {
    if let Some(existing) = flow.existing() {
        let how = flow.duplicate_fault().unwrap_or(DuplicateAnswer::Replay);
        return duplicate(how, &existing);
    }
    let intake = match validate(config, app.config.decimals, request) {
        Ok(intake) => intake,
        Err(refused) => return refused,
    };
    let decimals = app.config.decimals;
    let symbol = config.currency_symbol.clone();
    let accepted = flow.accept(intake, |op| {
        answer(
            200,
            &json!({
                "activity_id": op.activity_id,
                "symbol": symbol,
                "amount": to_whole(op.amount_wei, decimals),
                "destination_type": "DESTINATION_BLOCKCHAIN",
                "blockchain_destination": {"address": op.destination},
                "transaction_id": op.records.first().map(|r| r.id.as_str()),
            }),
        )
    });
    accepted.unwrap_or_else(|existing| {
        let how = flow.duplicate_fault().unwrap_or(DuplicateAnswer::Replay);
        duplicate(how, &existing)
    })
}

fn duplicate(how: DuplicateAnswer, existing: &Operation) -> StoredAnswer {
    match how {
        DuplicateAnswer::Replay => existing.first_answer.clone(),
        DuplicateAnswer::Reject => prime_error(400, "idempotency key already used"),
        DuplicateAnswer::Conflict => prime_error(409, "idempotency key already used"),
        DuplicateAnswer::AfterError => {
            prime_error(400, "idempotency key was already used with an error")
        }
    }
}

fn validate(
    config: &PrimeConfig,
    decimals: u32,
    request: &WithdrawBody,
) -> Result<Intake, StoredAnswer> {
    let refuse = |message: &str| Err(prime_error(400, message));
    if request.destination_type != "DESTINATION_BLOCKCHAIN" {
        return refuse("unsupported destination_type");
    }
    if request.currency_symbol != config.currency_symbol {
        return refuse("unsupported currency_symbol");
    }
    let address = match &request.blockchain_address {
        Some(destination) if is_address(&destination.address) => {
            destination.address.to_ascii_lowercase()
        }
        _ => return refuse("invalid blockchain_address"),
    };
    match from_whole(&request.amount, decimals) {
        Some(amount_wei) if amount_wei > 0 => Ok(Intake {
            destination: address,
            amount_wei,
            note: None,
        }),
        _ => refuse("invalid amount"),
    }
}

/// The list's filters.
#[derive(Debug, Default)]
struct Filter {
    withdrawals: bool,
    start_ms: Option<i64>,
    end_ms: Option<i64>,
}

fn filter(pairs: &[(String, String)]) -> Result<Filter, StoredAnswer> {
    let mut filter = Filter {
        withdrawals: true,
        ..Filter::default()
    };
    let mut types = pairs.iter().filter(|(k, _)| k == "types").peekable();
    if types.peek().is_some() {
        filter.withdrawals = types.any(|(_, v)| v.split(',').any(|t| t == "WITHDRAWAL"));
    }
    for (name, value) in pairs {
        let time = || {
            DateTime::parse_from_rfc3339(value)
                .map(|t| t.timestamp_millis())
                .map_err(|_| prime_error(400, &format!("invalid {name}")))
        };
        match name.as_str() {
            "start_time" => filter.start_ms = Some(time()?),
            "end_time" => filter.end_ms = Some(time()?),
            _ => {}
        }
    }
    Ok(filter)
}

async fn list(
    State(app): State<Arc<App>>,
    (method, uri, headers): (Method, Uri, HeaderMap),
    path: Result<Path<String>, PathRejection>,
) -> Response {
    let mut note = Note::of(Profile::Prime);
    let Ok(Path(portfolio)) = path else {
        return respond(&error(Profile::Prime, 400, "invalid path"), note);
    };
    if let Err(refused) = admit(&app, (&method, &uri, &headers, b""), &portfolio) {
        return respond(&refused, note);
    }
    let filter = match Query::<Vec<(String, String)>>::try_from_uri(&uri) {
        Ok(Query(pairs)) => filter(&pairs),
        Err(_) => Err(prime_error(400, "invalid query")),
    };
    let filter = match filter {
        Ok(filter) => filter,
        Err(refused) => return respond(&refused, note),
    };
    if let Err(limited) = read_call(&app, Profile::Prime, "", &mut note) {
        return *limited;
    }
    let transactions = if filter.withdrawals {
        listed(&app, &filter)
    } else {
        Vec::new()
    };
    let body = json!({
        "transactions": transactions,
        "pagination": {"next_cursor": "", "sort_direction": "DESC", "has_next": false},
    });
    respond(&answer(200, &body), note)
}

/// "Get Transaction by Transaction ID": `{"transaction": ..}` as the list shows it (the same
/// lags), or `404` while no visible withdrawal has a record with that id.
async fn one(
    State(app): State<Arc<App>>,
    (method, uri, headers): (Method, Uri, HeaderMap),
    path: Result<Path<(String, String)>, PathRejection>,
) -> Response {
    let mut note = Note::of(Profile::Prime);
    let Ok(Path((portfolio, id))) = path else {
        return respond(&error(Profile::Prime, 400, "invalid path"), note);
    };
    if let Err(refused) = admit(&app, (&method, &uri, &headers, b""), &portfolio) {
        return respond(&refused, note);
    }
    let now = app.now_ms();
    let found = app
        .shared
        .ops(Some(Profile::Prime))
        .into_iter()
        .find_map(|op| {
            let at = now.saturating_sub(op.plan.status_lag_ms);
            let index = op.records.iter().position(|r| r.id == id)?;
            let record = &op.records[index];
            let shown = visible(&app, &op) && (index == 0 || record.created_ms <= at);
            shown.then(|| {
                (
                    op.reference.clone(),
                    app.views().record(&op, record, record.as_of(at)),
                )
            })
        });
    let reference = found
        .as_ref()
        .map_or("", |(reference, _)| reference.as_str());
    if let Err(limited) = read_call(&app, Profile::Prime, reference, &mut note) {
        return *limited;
    }
    match found {
        Some((_, view)) => respond(&answer(200, &json!({ "transaction": view })), note),
        None => respond(&prime_error(404, "transaction not found"), note),
    }
}

/// The transactions shown: every record of every visible withdrawal, newest first. A window
/// matches a record created in it by the double's clock or by real time (the clock may have
/// been moved ahead of the client's).
fn listed(app: &App, filter: &Filter) -> Vec<Value> {
    let now = app.now_ms();
    let inside =
        |ms: i64| filter.start_ms.is_none_or(|s| ms >= s) && filter.end_ms.is_none_or(|e| ms <= e);
    let mut rows: Vec<(i64, Value)> = Vec::new();
    for op in app.shared.ops(Some(Profile::Prime)) {
        if !visible(app, &op) {
            continue;
        }
        let at = now.saturating_sub(op.plan.status_lag_ms);
        let offset = op.accepted_ms - op.accepted_real_ms;
        for (index, record) in op.records.iter().enumerate() {
            if index > 0 && record.created_ms > at {
                continue;
            }
            if !inside(record.created_ms) && !inside(record.created_ms - offset) {
                continue;
            }
            let view = app.views().record(&op, record, record.as_of(at));
            rows.push((record.created_ms, view));
        }
    }
    rows.sort_by_key(|row| std::cmp::Reverse(row.0));
    rows.into_iter().map(|(_, view)| view).collect()
}
