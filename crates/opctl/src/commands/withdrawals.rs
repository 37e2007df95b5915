//! `create`, `get`, `list`, `balance` (OperationsService).

use super::refusal::refused;
use crate::cli::{CreateArgs, ListArgs};
use crate::client::{Service, Session};
use crate::error::{Done, Failure};
use crate::output::{Output, Report, balance_report, withdrawal_json, withdrawal_table};
use opledger_proto::v1 as pb;
use serde_json::{Value, json};

/// The idempotency key to send, and whether opctl generated it.
fn idempotency_key(args: &CreateArgs) -> Result<(String, bool), Failure> {
    match &args.idempotency_key {
        Some(given) => {
            // The domain's messages never quote the key.
            opledger_domain::IdempotencyKey::parse(&given.0)
                .map_err(|e| Failure::usage(format!("--idempotency-key: {e}")))?;
            Ok((given.0.clone(), false))
        }
        None => Ok((uuid::Uuid::new_v4().to_string(), true)),
    }
}

pub async fn create(session: &Session, out: &Output, args: &CreateArgs) -> Result<Done, Failure> {
    create_withdrawal(session, out, args).await?;
    Ok(Done::Ok)
}

/// Creates (or replays) the withdrawal `args` describe, prints it, and returns its id.
pub async fn create_withdrawal(
    session: &Session,
    out: &Output,
    args: &CreateArgs,
) -> Result<String, Failure> {
    if args.memo.as_deref() == Some("") {
        return Err(Failure::usage(
            "--memo: must not be empty (leave the flag out for no memo)",
        ));
    }
    let (key, generated) = idempotency_key(args)?;
    if generated {
        // Printed once, before anything is sent, so that a retry after a transient failure (exit
        // 3) can reuse it. Scripts should pass their own --idempotency-key.
        let line = format!(
            "generated idempotency key {key}; to retry this create, pass --idempotency-key {key}"
        );
        if out.json {
            out.note(&line);
        } else {
            out.text(&format!(
                "idempotency key  {key} (generated; reuse it to retry)"
            ));
        }
    }
    let mut client = session.operations().await?;
    let request = pb::CreateWithdrawalRequest {
        idempotency_key: key,
        payload: Some(pb::WithdrawalPayload {
            source_account: args.account.clone(),
            asset: args.asset.clone(),
            network: args.network.clone(),
            destination: args.to.clone(),
            memo: args.memo.clone(),
            amount: args.amount.clone(),
            fee_cap: args.fee_cap.clone(),
            policy_version: args.policy_version,
        }),
    };
    let created = client
        .create_withdrawal(session.request(request))
        .await
        .map_err(refused(Service::Operations))?
        .into_inner();
    let w = created.withdrawal.unwrap_or_default();
    out.report(&created_report(&w, created.replayed, generated));
    Ok(w.withdrawal_id)
}

fn created_report(w: &pb::Withdrawal, replayed: bool, generated: bool) -> Report {
    let mut json = withdrawal_json(w);
    if let Value::Object(map) = &mut json {
        map.insert("replayed".into(), Value::Bool(replayed));
        map.insert("idempotency_key_generated".into(), Value::Bool(generated));
    }
    let heading = if replayed {
        "replayed: this idempotency key had already created this withdrawal; nothing changed"
    } else {
        "created"
    };
    Report {
        text: format!(
            "{heading}\nwithdrawal     {}\nstate          {}\npayload hash   {}\n",
            w.withdrawal_id,
            crate::states::state_name(w.state),
            w.payload_hash
        ),
        json,
    }
}

pub async fn get(session: &Session, out: &Output, id: &str) -> Result<Done, Failure> {
    let w = fetch(session, id).await?;
    out.report(&Report {
        text: crate::output::withdrawal_text(&w),
        json: withdrawal_json(&w),
    });
    Ok(Done::Ok)
}

/// One withdrawal of the caller's tenant.
pub async fn fetch(session: &Session, id: &str) -> Result<pb::Withdrawal, Failure> {
    let mut client = session.operations().await?;
    client
        .get_withdrawal(session.request(pb::GetWithdrawalRequest {
            withdrawal_id: id.to_owned(),
        }))
        .await
        .map(tonic::Response::into_inner)
        .map_err(refused(Service::Operations))
}

pub async fn list(session: &Session, out: &Output, args: &ListArgs) -> Result<Done, Failure> {
    let mut client = session.operations().await?;
    let listed = client
        .list_withdrawals(session.request(pb::ListWithdrawalsRequest {
            page_size: args.page_size.unwrap_or(0),
            page_token: args.page_token.clone().unwrap_or_default(),
            states: args.states.iter().map(|s| *s as i32).collect(),
        }))
        .await
        .map_err(refused(Service::Operations))?
        .into_inner();
    let mut text = withdrawal_table(&listed.withdrawals);
    if !listed.next_page_token.is_empty() {
        text.push_str(&format!(
            "more: --page-token {} (with the same --state)\n",
            listed.next_page_token
        ));
    }
    out.report(&Report {
        text,
        json: json!({
            "withdrawals": listed.withdrawals.iter().map(withdrawal_json).collect::<Vec<_>>(),
            "next_page_token": listed.next_page_token,
        }),
    });
    Ok(Done::Ok)
}

pub async fn balance(
    session: &Session,
    out: &Output,
    account: &str,
    asset: &str,
) -> Result<Done, Failure> {
    let mut client = session.operations().await?;
    let balance = client
        .get_balance(session.request(pb::GetBalanceRequest {
            account: account.to_owned(),
            asset: asset.to_owned(),
        }))
        .await
        .map_err(refused(Service::Operations))?
        .into_inner();
    out.report(&balance_report(&balance));
    Ok(Done::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::IdempotencyKeyArg;

    fn args(key: Option<&str>) -> CreateArgs {
        CreateArgs {
            account: "treasury".into(),
            asset: "ETH".into(),
            network: "anvil".into(),
            to: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8".into(),
            amount: "1".into(),
            fee_cap: "1".into(),
            memo: None,
            policy_version: 1,
            idempotency_key: key.map(|k| IdempotencyKeyArg(k.to_owned())),
        }
    }

    #[test]
    fn a_missing_key_is_generated_and_a_given_one_is_checked_without_quoting_it() {
        let (key, generated) = idempotency_key(&args(None)).expect("generated");
        assert!(generated);
        assert!(opledger_domain::IdempotencyKey::parse(&key).is_ok());
        let given = "9b2f6c1e-0d7a-4e58-b3c9-5a1f2e3d4c5b";
        assert_eq!(
            idempotency_key(&args(Some(given))).expect("valid"),
            (given.to_owned(), false)
        );
        let weak = "aaaaaaaaaaaaaaaaaaaa";
        let f = idempotency_key(&args(Some(weak))).expect_err("low entropy");
        assert_eq!(f.exit_code(), 2);
        assert!(!f.message.contains(weak));
    }

    #[test]
    fn create_reports_id_state_hash_and_replay() {
        let w = pb::Withdrawal {
            withdrawal_id: "0190c4c8-4b5d-7c6e-8f90-123456789abc".into(),
            payload_hash: "cd".repeat(32),
            state: pb::WithdrawalState::Requested as i32,
            ..Default::default()
        };
        let r = created_report(&w, true, false);
        assert_eq!(r.json["replayed"], true);
        assert_eq!(r.json["state"], "REQUESTED");
        assert!(r.text.starts_with("replayed"));
        assert!(r.text.contains(&"cd".repeat(32)));
    }
}
