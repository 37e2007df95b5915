//! `credit create`, `credit pending`, `credit get`, `credit sign` (OperationsService). `create`
//! and `sign` build a credit statement from exactly the fields they show (`crate::credit_review`),
//! sign it locally with the operator's own key and send only the key id, the policy version and
//! the signature; the policy version comes from `--policy-version` or the approvals service.

use super::approvals::{policy_of, tenant_id};
use super::refusal::refused;
use crate::cli::{CreditCommand, CreditCreateArgs, CreditSignArgs, OperatorSigningArgs};
use crate::client::{Service, Session};
use crate::credit_review::{self, CreditId, Shown, signing_text, statement_json};
use crate::error::{Done, Failure};
use crate::keyfile;
use crate::output::{Output, Report, balance_json, balance_text, printable, rfc3339, table};
use crate::states::{credit_kind_name, credit_state_name};
use opledger_domain::amount::Amount;
use opledger_domain::approval::{CreditStatement, SigningKey};
use opledger_domain::idempotency::IdempotencyKey;
use opledger_domain::ids::TenantId;
use opledger_domain::payload::{AccountName, AssetCode};
use opledger_proto::v1 as pb;
use serde_json::{Value, json};

pub async fn run(
    session: &Session,
    out: &Output,
    command: &CreditCommand,
) -> Result<Done, Failure> {
    match command {
        CreditCommand::Create(args) => create(session, out, args).await,
        CreditCommand::Pending { page_size } => pending(session, out, page_size.unwrap_or(0)).await,
        CreditCommand::Get { credit_id } => get(session, out, *credit_id).await,
        CreditCommand::Sign(args) => sign(session, out, args).await,
    }
}

/// The operator's signing key: `--key-file` wins over `OPLEDGER_OPERATOR_KEY`.
fn operator_key(signing: &OperatorSigningArgs) -> Result<SigningKey, Failure> {
    if let Some(path) = &signing.key_file {
        return keyfile::read(path);
    }
    match &signing.operator_signing_key {
        Some(hex) if !hex.expose().is_empty() => keyfile::parse(hex.expose(), "operator")
            .map_err(|what| Failure::usage(format!("OPLEDGER_OPERATOR_KEY: {what}"))),
        _ => Err(Failure::usage(
            "an operator key is required to sign: --key-file FILE or OPLEDGER_OPERATOR_KEY \
             (create one with `opctl approver keygen --out FILE` and have it registered with \
             `opledger-admin trust publish --operator`)",
        )),
    }
}

/// What `credit create` proposes, from the command line alone: the idempotency key (and whether
/// opctl generated it) and the credit's fields, its id computed from that key.
fn proposal(args: &CreditCreateArgs) -> Result<(IdempotencyKey, bool, Shown), Failure> {
    let (text, generated) = match &args.idempotency_key {
        Some(given) => (given.0.clone(), false),
        None => (uuid::Uuid::new_v4().to_string(), true),
    };
    // The domain's messages never quote the key.
    let key = IdempotencyKey::parse(&text)
        .map_err(|e| Failure::usage(format!("--idempotency-key: {e}")))?;
    let account = AccountName::parse(&args.account)
        .map_err(|_| Failure::usage("--account: [a-z0-9][a-z0-9_-]{0,62}, e.g. treasury"))?;
    let asset = AssetCode::parse(&args.asset)
        .map_err(|_| Failure::usage("--asset: [A-Z0-9]{1,16}, e.g. ETH"))?;
    let amount = Amount::parse(&args.amount)
        .ok()
        .filter(|a| !a.is_zero())
        .ok_or_else(|| Failure::usage("--amount: minimal units as digits, at least 1"))?;
    let shown = credit_review::proposed(&key, account, asset, amount);
    Ok((key, generated, shown))
}

/// The statement of exactly `shown` for `tenant`, signed with `key`, and the wire form sent.
fn signed(
    shown: &Shown,
    tenant: TenantId,
    key: &SigningKey,
    policy_version: u64,
) -> Result<(CreditStatement, pb::SignedCreditStatement), Failure> {
    if policy_version == 0 {
        return Err(Failure::refused_locally(
            "TRUST_STATEMENT_MISSING",
            "the tenant has no published trust statement: nothing can be credited yet (the \
             tenant administrator publishes one with `opledger-admin trust publish`)",
            &[],
        ));
    }
    let statement = shown.statement(tenant, keyfile::key_id(key), policy_version);
    let signature = statement
        .sign(key)
        .map_err(|e| Failure::usage(format!("cannot sign the credit statement: {e}")))?;
    let wire = pb::SignedCreditStatement {
        operator_key_id: statement.operator_key_id.to_hex(),
        policy_version: statement.policy_version,
        signature: signature.to_bytes().to_vec(),
    };
    Ok((statement, wire))
}

/// `--policy-version`, else the tenant's current version as the approvals service reports it.
async fn policy_version(
    session: &Session,
    given: Option<u64>,
    asset: &AssetCode,
) -> Result<u64, Failure> {
    match given {
        Some(version) => Ok(version),
        None => Ok(policy_of(session, asset.as_str()).await?.policy_version),
    }
}

/// Shows what is about to be signed (text output; `--json` puts it in the result).
fn show(out: &Output, statement: &CreditStatement) {
    if !out.json {
        out.text(&signing_text(statement));
    }
}

pub async fn create(
    session: &Session,
    out: &Output,
    args: &CreditCreateArgs,
) -> Result<Done, Failure> {
    // The key and every field are checked before anything is sent.
    let key = operator_key(&args.signing)?;
    let tenant = tenant_id(&args.signing.tenant)?;
    let (idempotency_key, generated, shown) = proposal(args)?;
    if generated {
        // Printed once, before anything is sent, so that a retry after a transient failure (exit
        // 3) can reuse it. Scripts should pass their own --idempotency-key.
        let key = idempotency_key.expose();
        let line = format!(
            "generated idempotency key {key}; to retry this credit, pass --idempotency-key {key}"
        );
        if out.json {
            out.note(&line);
        } else {
            out.text(&format!(
                "idempotency key  {key} (generated; reuse it to retry)"
            ));
        }
    }
    let version = policy_version(session, args.policy_version, &shown.asset).await?;
    let (statement, wire) = signed(&shown, tenant, &key, version)?;
    show(out, &statement);
    let mut client = session.operations().await?;
    let done = client
        .credit_account(session.request(pb::CreditAccountRequest {
            idempotency_key: idempotency_key.expose().to_owned(),
            account: shown.account.as_str().to_owned(),
            asset: shown.asset.as_str().to_owned(),
            amount: shown.amount.to_string(),
            statement: Some(wire),
        }))
        .await
        .map_err(refused(Service::Operations))?
        .into_inner();
    out.report(&created_report(&statement, &done, generated));
    Ok(Done::Ok)
}

/// Refuses locally (exit 1, nothing signed or sent) a credit the answer says is no longer
/// pending: the service would refuse the statement with the same reason.
fn check_pending(c: &pb::Credit) -> Result<(), Failure> {
    match pb::CreditState::try_from(c.state) {
        Ok(pb::CreditState::Credited | pb::CreditState::Refused) => Err(Failure::refused_locally(
            "CREDIT_NOT_PENDING",
            format!(
                "the credit is {} (the operations service's answer): there is nothing to \
                     sign; nothing was signed or sent",
                credit_state_name(c.state)
            ),
            &[("state", credit_state_name(c.state))],
        )),
        Ok(pb::CreditState::Pending | pb::CreditState::Unspecified) | Err(_) => Ok(()),
    }
}

/// The answer to `GetCredit(asked)` checked before anything is signed: exit 6 when it names
/// another credit or a field does not parse, exit 1 when it is no longer pending.
fn checked(asked: CreditId, c: &pb::Credit) -> Result<Shown, Failure> {
    let shown = credit_review::review(asked, c)?;
    check_pending(c)?;
    Ok(shown)
}

pub async fn sign(session: &Session, out: &Output, args: &CreditSignArgs) -> Result<Done, Failure> {
    let key = operator_key(&args.signing)?;
    let tenant = tenant_id(&args.signing.tenant)?;
    let answer = fetch(session, args.credit_id).await?;
    let shown = checked(args.credit_id, &answer)?;
    let version = policy_version(session, args.policy_version, &shown.asset).await?;
    let (statement, wire) = signed(&shown, tenant, &key, version)?;
    show(out, &statement);
    let mut client = session.operations().await?;
    let done = client
        .sign_credit(session.request(pb::SignCreditRequest {
            credit_id: args.credit_id.to_hex(),
            statement: Some(wire),
        }))
        .await
        .map_err(refused(Service::Operations))?
        .into_inner();
    out.report(&signed_report(&statement, &done));
    Ok(Done::Ok)
}

/// One credit of the caller's tenant.
async fn fetch(session: &Session, id: CreditId) -> Result<pb::Credit, Failure> {
    let mut client = session.operations().await?;
    client
        .get_credit(session.request(pb::GetCreditRequest {
            credit_id: id.to_hex(),
        }))
        .await
        .map(tonic::Response::into_inner)
        .map_err(refused(Service::Operations))
}

pub async fn get(session: &Session, out: &Output, id: CreditId) -> Result<Done, Failure> {
    let c = fetch(session, id).await?;
    out.report(&Report {
        text: credit_text(&c),
        json: credit_json(&c),
    });
    Ok(Done::Ok)
}

pub async fn pending(session: &Session, out: &Output, page_size: i32) -> Result<Done, Failure> {
    let mut client = session.operations().await?;
    let listed = client
        .list_pending_credits(session.request(pb::ListPendingCreditsRequest { page_size }))
        .await
        .map_err(refused(Service::Operations))?
        .into_inner();
    out.report(&pending_report(&listed.credits));
    Ok(Done::Ok)
}

/// A credit for scripts.
fn credit_json(c: &pb::Credit) -> Value {
    json!({
        "credit_id": c.credit_id,
        "kind": credit_kind_name(c.kind),
        "state": credit_state_name(c.state),
        "account": c.account,
        "asset": c.asset,
        "amount": c.amount,
        "chain_evidence": c.chain_evidence,
        "operator_statements": c.operator_statements,
        "refusal_reason": c.refusal_reason,
        "created_at": c.created_at.as_ref().map(rfc3339),
    })
}

/// A credit for people, one field per line; control and direction characters of an answer are
/// escaped.
fn credit_text(c: &pb::Credit) -> String {
    let rows: [(&str, String); 10] = [
        ("credit id", printable(&c.credit_id)),
        ("kind", credit_kind_name(c.kind)),
        ("state", credit_state_name(c.state)),
        ("account", printable(&c.account)),
        ("asset", printable(&c.asset)),
        ("amount", printable(&c.amount)),
        (
            "evidence",
            if c.chain_evidence {
                "chain (verified by the witness)".to_owned()
            } else {
                "operators' statements".to_owned()
            },
        ),
        ("statements", c.operator_statements.to_string()),
        ("refusal", printable(&c.refusal_reason)),
        (
            "created",
            c.created_at
                .as_ref()
                .map_or_else(|| "-".to_owned(), rfc3339),
        ),
    ];
    let mut text = String::new();
    for (label, value) in rows {
        text.push_str(&format!("{label:<15}{value}\n"));
    }
    text
}

/// Pending credits as a table.
fn pending_report(credits: &[pb::Credit]) -> Report {
    let rows: Vec<Vec<String>> = credits
        .iter()
        .map(|c| {
            vec![
                c.credit_id.escape_debug().to_string(),
                credit_kind_name(c.kind),
                credit_state_name(c.state),
                c.account.escape_debug().to_string(),
                c.asset.escape_debug().to_string(),
                c.amount.escape_debug().to_string(),
                if c.chain_evidence {
                    "chain"
                } else {
                    "operators"
                }
                .to_owned(),
                c.operator_statements.to_string(),
            ]
        })
        .collect();
    Report {
        text: table(
            &[
                "CREDIT_ID",
                "KIND",
                "STATE",
                "ACCOUNT",
                "ASSET",
                "AMOUNT",
                "EVIDENCE",
                "STATEMENTS",
            ],
            &rows,
            "no pending credits",
        ),
        json: json!({
            "credits": credits.iter().map(credit_json).collect::<Vec<_>>(),
        }),
    }
}

/// The result of `credit create`: the credit, the balance, and the statement signed.
fn created_report(
    statement: &CreditStatement,
    done: &pb::CreditAccountResponse,
    generated: bool,
) -> Report {
    let credit = done.credit.clone().unwrap_or_default();
    let balance = done.balance.clone().unwrap_or_default();
    let mut json = credit_json(&credit);
    if let Value::Object(map) = &mut json {
        map.insert("replayed".into(), Value::Bool(done.replayed));
        map.insert("idempotency_key_generated".into(), Value::Bool(generated));
        map.insert("statement".into(), statement_json(statement));
        map.insert("balance".into(), balance_json(&balance));
    }
    let heading = if done.replayed {
        "replayed: this idempotency key had already proposed this credit; your statement was \
         added if it was new"
    } else {
        "proposed"
    };
    Report {
        text: format!(
            "{heading}\n{}{}",
            credit_text(&credit),
            balance_text(&balance)
        ),
        json,
    }
}

/// The result of `credit sign`: the credit as the service answers it, and the statement signed.
fn signed_report(statement: &CreditStatement, done: &pb::Credit) -> Report {
    let mut json = credit_json(done);
    if let Value::Object(map) = &mut json {
        map.insert("statement".into(), statement_json(statement));
    }
    Report {
        text: format!("signed\n{}", credit_text(done)),
        json,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{IdempotencyKeyArg, SecretHex};

    const TENANT: &str = "0190c4c8-0000-7c6e-8f90-123456789abc";
    const KEY: &str = "credit-9b2f6c1e-0d7a-4e58-b3c9-5a1f2e3d4c5b";

    fn operator() -> SigningKey {
        SigningKey::from_bytes(&[9; 32])
    }

    fn signing() -> OperatorSigningArgs {
        OperatorSigningArgs {
            key_file: None,
            operator_signing_key: None,
            tenant: TENANT.into(),
        }
    }

    fn create_args(key: Option<&str>, amount: &str) -> CreditCreateArgs {
        CreditCreateArgs {
            account: "treasury".into(),
            asset: "ETH".into(),
            amount: amount.into(),
            idempotency_key: key.map(|k| IdempotencyKeyArg(k.to_owned())),
            policy_version: None,
            signing: signing(),
        }
    }

    fn tenant() -> TenantId {
        TENANT.parse().expect("uuid")
    }

    #[test]
    fn a_proposal_names_the_digest_of_the_key_it_sends() {
        let (key, generated, shown) = proposal(&create_args(Some(KEY), "500")).expect("valid");
        assert!(!generated);
        assert_eq!(shown.id.bytes(), &key.digest());
        assert_eq!(shown.amount, Amount::new(500));
        let (key, generated, shown) = proposal(&create_args(None, "500")).expect("generated");
        assert!(generated);
        assert_eq!(shown.id, CreditId::of_key(&key));
        let weak = "aaaaaaaaaaaaaaaaaaaa";
        let f = proposal(&create_args(Some(weak), "500")).expect_err("low entropy");
        assert_eq!(f.exit_code(), 2);
        assert!(!f.message.contains(weak));
        let mut bad = create_args(Some(KEY), "500");
        bad.account = "Treasury".into();
        assert_eq!(proposal(&bad).expect_err("account").exit_code(), 2);
        bad = create_args(Some(KEY), "500");
        bad.asset = "eth".into();
        assert_eq!(proposal(&bad).expect_err("asset").exit_code(), 2);
        assert_eq!(
            proposal(&create_args(Some(KEY), "0"))
                .expect_err("zero")
                .exit_code(),
            2
        );
    }

    #[test]
    fn the_wire_statement_carries_the_key_id_version_and_a_signature_over_the_shown_fields() {
        let (_, _, shown) = proposal(&create_args(Some(KEY), "500")).expect("valid");
        let (statement, wire) = signed(&shown, tenant(), &operator(), 4).expect("signed");
        assert_eq!(wire.operator_key_id, keyfile::key_id(&operator()).to_hex());
        assert_eq!(wire.policy_version, 4);
        statement
            .verify(&operator().verifying_key(), &wire.signature)
            .expect("verifies over the statement shown");
        assert_eq!(statement.tenant_id, tenant());
        assert_eq!(&statement.credit_id, shown.id.bytes());
        let f = signed(&shown, tenant(), &operator(), 0).expect_err("no trust statement");
        assert_eq!(
            (f.reason.as_str(), f.exit_code()),
            ("TRUST_STATEMENT_MISSING", 1)
        );
    }

    #[test]
    fn the_operator_key_comes_from_the_file_or_the_environment_and_is_never_quoted() {
        let f = operator_key(&signing()).expect_err("no key");
        assert_eq!(f.exit_code(), 2);
        assert!(f.message.contains("OPLEDGER_OPERATOR_KEY"), "{}", f.message);
        let mut s = signing();
        let secret = "xy".repeat(32);
        s.operator_signing_key = Some(SecretHex::from_test(&secret));
        let f = operator_key(&s).expect_err("malformed");
        assert!(!f.message.contains(&secret), "{}", f.message);
        assert!(f.message.contains("not an operator key"), "{}", f.message);
        s.operator_signing_key = Some(SecretHex::from_test(&"09".repeat(32)));
        assert_eq!(operator_key(&s).expect("hex").to_bytes(), [9; 32]);
        let dir = std::env::temp_dir().join(format!("opctl-operator-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("operator.key");
        let written = keyfile::generate(&path).expect("generated");
        s.key_file = Some(path);
        assert_eq!(
            operator_key(&s).expect("file wins").to_bytes(),
            written.to_bytes()
        );
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    fn answer(id: &CreditId, state: pb::CreditState) -> pb::Credit {
        pb::Credit {
            credit_id: id.to_hex(),
            kind: pb::CreditKind::Deposit as i32,
            state: state as i32,
            account: "treasury".into(),
            asset: "ETH".into(),
            amount: "1000".into(),
            chain_evidence: false,
            operator_statements: 0,
            refusal_reason: String::new(),
            created_at: Some(prost_types::Timestamp {
                seconds: 1_800_000_000,
                nanos: 0,
            }),
        }
    }

    #[test]
    fn only_a_pending_credit_of_the_asked_id_is_signed() {
        let id = CreditId::parse(&"cd".repeat(32)).expect("id");
        let shown = checked(id, &answer(&id, pb::CreditState::Pending)).expect("pending");
        assert_eq!(shown.amount, Amount::new(1000));
        for state in [pb::CreditState::Credited, pb::CreditState::Refused] {
            let f = checked(id, &answer(&id, state)).expect_err("not pending");
            assert_eq!(
                (f.reason.as_str(), f.exit_code()),
                ("CREDIT_NOT_PENDING", 1)
            );
        }
        let other = CreditId::parse(&"ef".repeat(32)).expect("id");
        let f = checked(id, &answer(&other, pb::CreditState::Pending)).expect_err("other");
        assert_eq!(
            (f.reason.as_str(), f.exit_code()),
            ("CREDIT_ID_MISMATCH", 6)
        );
        let mut broken = answer(&id, pb::CreditState::Credited);
        broken.amount = "1e3".into();
        let f = checked(id, &broken).expect_err("unparseable");
        assert_eq!(
            (f.reason.as_str(), f.exit_code()),
            ("CREDIT_UNPARSEABLE", 6)
        );
        assert_eq!(f.metadata["field"], "amount");
    }

    #[test]
    fn credits_render_with_short_names_and_the_balance_with_pending() {
        let id = CreditId::parse(&"cd".repeat(32)).expect("id");
        let c = answer(&id, pb::CreditState::Pending);
        let v = credit_json(&c);
        assert_eq!(v["state"], "PENDING");
        assert_eq!(v["kind"], "DEPOSIT");
        assert_eq!(v["created_at"], "2027-01-15T08:00:00Z");
        let text = credit_text(&c);
        assert!(text.contains("state          PENDING\n"), "{text}");
        assert!(
            text.contains("evidence       operators' statements\n"),
            "{text}"
        );
        let table = pending_report(std::slice::from_ref(&c));
        let row = table.text.lines().nth(1).unwrap_or_default();
        assert!(
            row.starts_with(&id.to_hex()) && row.contains("PENDING"),
            "{row}"
        );
        assert_eq!(pending_report(&[]).text, "no pending credits\n");
        let (_, _, shown) = proposal(&create_args(Some(KEY), "1000")).expect("valid");
        let (statement, _) = signed(&shown, tenant(), &operator(), 1).expect("signed");
        let done = pb::CreditAccountResponse {
            balance: Some(pb::Balance {
                account: "treasury".into(),
                asset: "ETH".into(),
                available: "0".into(),
                held: "0".into(),
                pending: "1000".into(),
                owed: "0".into(),
            }),
            replayed: false,
            credit: Some(c),
        };
        let r = created_report(&statement, &done, true);
        assert!(r.text.starts_with("proposed\n"), "{}", r.text);
        assert!(r.text.contains("pending    1000\n"), "{}", r.text);
        assert_eq!(r.json["balance"]["pending"], "1000");
        assert_eq!(r.json["statement"]["amount"], "1000");
        assert_eq!(r.json["idempotency_key_generated"], true);
        let mut hostile = answer(&id, pb::CreditState::Pending);
        hostile.account = "x\u{1b}[2J".into();
        assert!(!credit_text(&hostile).contains('\u{1b}'));
        let s = signed_report(&statement, &hostile);
        assert!(s.text.starts_with("signed\n"));
        assert_eq!(s.json["statement"]["credit_id"], shown.id.to_hex());
    }
}
