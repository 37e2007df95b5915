//! The `lookup_by_reference` profile: Fireblocks v1 create, lookup by externalTxId, JWKS.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::{get, post};
use http::{HeaderMap, Uri};
use serde::Deserialize;
use serde_json::json;

use crate::accept::{Flow, Intake, read_call, visible};
use crate::amount::{from_whole, is_address};
use crate::app::App;
use crate::clock::Clock;
use crate::config::FireblocksConfig;
use crate::faults::DuplicateAnswer;
use crate::fireblocks_auth;
use crate::profile::Profile;
use crate::record::{Operation, StoredAnswer};
use crate::reply::{Note, answer, error, fireblocks_error, respond};

/// The longest `Idempotency-Key` accepted.
const MAX_IDEMPOTENCY_KEY: usize = 40;

/// The profile's routes.
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/v1/transactions", post(create))
        .route(
            "/v1/transactions/external_tx_id/{external_tx_id}",
            get(lookup),
        )
        .route("/.well-known/jwks.json", get(jwks))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateBody {
    asset_id: String,
    #[serde(default)]
    operation: Option<String>,
    source: Party,
    destination: Party,
    amount: String,
    external_tx_id: String,
    #[serde(default)]
    note: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Party {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    one_time_address: Option<OneTimeAddress>,
}

#[derive(Debug, Deserialize)]
struct OneTimeAddress {
    address: String,
}

fn unauthorized() -> StoredAnswer {
    fireblocks_error(401, "Unauthorized", -7)
}

fn authenticate(
    app: &App,
    headers: &HeaderMap,
    uri: &Uri,
    body: &[u8],
) -> Result<(), StoredAnswer> {
    let (Some(key), Some(config)) = (&app.api_key, &app.config.fireblocks) else {
        return Err(unauthorized());
    };
    let path = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    let now_secs = Clock::real_ms() / 1000;
    match fireblocks_auth::verify(key, &config.api_key, headers, path, body, now_secs) {
        Ok(nonce) if app.shared.fresh_nonce(&nonce) => Ok(()),
        Ok(_) => {
            tracing::debug!("fireblocks: nonce reused");
            Err(unauthorized())
        }
        Err(reason) => {
            tracing::debug!("fireblocks: {reason}");
            Err(unauthorized())
        }
    }
}

fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, StoredAnswer> {
    let Some(value) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    match value.to_str() {
        Ok(key) if !key.is_empty() && key.len() <= MAX_IDEMPOTENCY_KEY => Ok(Some(key.to_owned())),
        _ => Err(fireblocks_error(400, "Invalid Idempotency-Key", 1003)),
    }
}

async fn create(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Response {
    let note = Note::of(Profile::Fireblocks);
    if let Err(refused) = authenticate(&app, &headers, &uri, &body) {
        return respond(&refused, note);
    }
    let request: CreateBody = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => {
            return respond(
                &fireblocks_error(400, &format!("Invalid request body: {e}"), 1003),
                note,
            );
        }
    };
    let idempotency = match idempotency_key(&headers) {
        Ok(key) => key,
        Err(refused) => return respond(&refused, note),
    };
    if request.external_tx_id.is_empty() {
        return respond(&fireblocks_error(400, "externalTxId is empty", 1003), note);
    }
    let mut flow = match Flow::begin(&app, Profile::Fireblocks, &request.external_tx_id, note) {
        Ok(flow) => flow,
        Err(limited) => return *limited,
    };
    let sent = decide(&app, &mut flow, &request, idempotency.as_deref());
    if let Some(key) = &idempotency {
        app.shared.remember_answer(key, sent.clone());
    }
    flow.respond(&sent)
}

fn decide(
    app: &App,
    flow: &mut Flow,
    request: &CreateBody,
    idempotency: Option<&str>,
) -> StoredAnswer {
    if let Some(stored) = idempotency.and_then(|key| app.shared.idempotent_answer(key)) {
        return match (flow.duplicate_fault(), flow.existing()) {
            (Some(how), Some(existing)) => duplicate(how, &existing),
            _ if stored.status >= 500 => used_with_error(),
            _ => stored,
        };
    }
    if let Some(existing) = flow.existing() {
        let how = flow.duplicate_fault().unwrap_or(DuplicateAnswer::Reject);
        return duplicate(how, &existing);
    }
    let intake = match app
        .config
        .fireblocks
        .as_ref()
        .map(|c| validate(c, app.config.decimals, request))
    {
        Some(Ok(intake)) => intake,
        Some(Err(refused)) => return refused,
        None => return fireblocks_error(404, "Not found", 1003),
    };
    let accepted = flow.accept(intake, |op| {
        let id = op.records.first().map(|r| r.id.clone()).unwrap_or_default();
        answer(200, &json!({"id": id, "status": "SUBMITTED"}))
    });
    accepted.unwrap_or_else(|existing| {
        let how = flow.duplicate_fault().unwrap_or(DuplicateAnswer::Reject);
        duplicate(how, &existing)
    })
}

fn used_with_error() -> StoredAnswer {
    fireblocks_error(400, "Idempotency key was already used with an error", 1439)
}

fn duplicate(how: DuplicateAnswer, existing: &Operation) -> StoredAnswer {
    const EXISTS: &str = "The external tx id that was provided in the request, already exists";
    match how {
        DuplicateAnswer::Reject => fireblocks_error(400, EXISTS, 1438),
        DuplicateAnswer::Conflict => fireblocks_error(409, EXISTS, 1438),
        DuplicateAnswer::Replay => existing.first_answer.clone(),
        DuplicateAnswer::AfterError => used_with_error(),
    }
}

fn validate(
    config: &FireblocksConfig,
    decimals: u32,
    request: &CreateBody,
) -> Result<Intake, StoredAnswer> {
    let refuse = |message: &str| Err(fireblocks_error(400, message, 1003));
    if request.asset_id != config.asset_id {
        return refuse("Unknown asset");
    }
    if request
        .operation
        .as_deref()
        .is_some_and(|o| o != "TRANSFER")
    {
        return refuse("Unsupported operation");
    }
    let source = &request.source;
    if source.kind != "VAULT_ACCOUNT" || source.id.as_deref() != Some(&config.vault_account_id) {
        return refuse("Unknown source");
    }
    let address = match (
        &request.destination.kind[..],
        &request.destination.one_time_address,
    ) {
        ("ONE_TIME_ADDRESS", Some(one_time)) if is_address(&one_time.address) => {
            one_time.address.to_ascii_lowercase()
        }
        _ => return refuse("Invalid destination address"),
    };
    match from_whole(&request.amount, decimals) {
        Some(amount_wei) if amount_wei > 0 => Ok(Intake {
            destination: address,
            amount_wei,
            note: request.note.clone(),
        }),
        _ => refuse("Invalid amount"),
    }
}

async fn lookup(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    uri: Uri,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    let mut note = Note::of(Profile::Fireblocks);
    let Ok(Path(external_tx_id)) = path else {
        return respond(&error(Profile::Fireblocks, 400, "Invalid path"), note);
    };
    if let Err(refused) = authenticate(&app, &headers, &uri, b"") {
        return respond(&refused, note);
    }
    note.reference = Some(external_tx_id.clone());
    if let Err(limited) = read_call(&app, Profile::Fireblocks, &external_tx_id, &mut note) {
        return *limited;
    }
    let found = app
        .shared
        .op(Profile::Fireblocks, &external_tx_id)
        .filter(|op| visible(&app, op));
    let shown = found.as_ref().and_then(|op| {
        let (record, snap) = op.shown(app.now_ms())?;
        Some(app.views().record(op, record, snap))
    });
    match shown {
        Some(view) => respond(&answer(200, &view), note),
        None => respond(&fireblocks_error(404, "Transaction not found", 1401), note),
    }
}

async fn jwks(State(app): State<Arc<App>>) -> Response {
    let keys = app.keys.as_ref().map(|ring| ring.jwks(app.now_ms()));
    let body = keys.unwrap_or_else(|| json!({"keys": []}));
    respond(&answer(200, &body), Note::default())
}
