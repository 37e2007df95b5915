//! `approve`, `reject`, `policy` (ApprovalsService; approve and reject read the withdrawal from
//! OperationsService and sign an approval statement locally), `approver keygen` (local only).

use super::refused;
use super::withdrawals::fetch;
use crate::cli::{ApproveArgs, ApproverCommand, RejectArgs, SigningArgs};
use crate::client::{Service, Session};
use crate::error::{Done, Failure};
use crate::keyfile;
use crate::output::{Output, Report, rfc3339, risk_flags};
use crate::states::state_name;
use opledger_domain::approval::{ApprovalStatement, Decision, SigningKey};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::PayloadHash;
use opledger_proto::v1 as pb;
use serde_json::json;

/// The approver's signing key: `--key-file` wins over `OPLEDGER_APPROVER_KEY`.
pub(super) fn signing_key(signing: &SigningArgs) -> Result<SigningKey, Failure> {
    if let Some(path) = &signing.key_file {
        return keyfile::read(path);
    }
    match &signing.approver_signing_key {
        Some(hex) if !hex.expose().is_empty() => keyfile::parse(hex.expose())
            .map_err(|what| Failure::usage(format!("OPLEDGER_APPROVER_KEY: {what}"))),
        _ => Err(Failure::usage(
            "an approver key is required to sign: --key-file FILE or OPLEDGER_APPROVER_KEY \
             (create one with `opctl approver keygen --out FILE`)",
        )),
    }
}

/// Refuses locally when the reviewed hash is not the withdrawal's.
fn check_reviewed_hash(w: &pb::Withdrawal, reviewed: Option<&str>) -> Result<(), Failure> {
    if let Some(reviewed) = reviewed
        && !reviewed.trim().eq_ignore_ascii_case(&w.payload_hash)
    {
        return Err(Failure::refused_locally(
            "PAYLOAD_HASH_MISMATCH",
            "the withdrawal's payload hash is not the one given with --payload-hash; review it \
             again (opctl get) before deciding",
            &[],
        ));
    }
    Ok(())
}

/// The signed statement: "key K decides D for withdrawal `w` of the tenant, whose payload hash
/// is H, under policy version V", and its signature.
fn signed_statement(
    w: &pb::Withdrawal,
    tenant: &str,
    decision: Decision,
    key: &SigningKey,
    policy_version: u64,
) -> Result<(ApprovalStatement, Vec<u8>), Failure> {
    let tenant_id: TenantId = tenant
        .parse()
        .map_err(|_| Failure::usage("--tenant: not a tenant id (a UUID)"))?;
    let operation_id: OperationId = w.withdrawal_id.parse().map_err(|_| {
        Failure::refused_locally(
            "INTERNAL",
            "the operations service answered a withdrawal id that is not a UUID",
            &[],
        )
    })?;
    let payload_hash = PayloadHash::from_hex(&w.payload_hash).map_err(|_| {
        Failure::refused_locally(
            "INTERNAL",
            "the operations service answered a payload hash that is not 64 hex digits",
            &[],
        )
    })?;
    if policy_version == 0 {
        return Err(Failure::refused_locally(
            "TRUST_STATEMENT_MISSING",
            "the tenant has no published trust statement: nothing can be approved yet (the \
             tenant administrator publishes one with `opledger-admin trust publish`)",
            &[],
        ));
    }
    let statement = ApprovalStatement {
        tenant_id,
        operation_id,
        payload_hash,
        decision,
        approver_key_id: keyfile::key_id(key),
        policy_version,
    };
    let signature = statement
        .sign(key)
        .map_err(|e| Failure::usage(format!("cannot sign the approval statement: {e}")))?;
    Ok((statement, signature.to_bytes().to_vec()))
}

/// The tenant's rules for `asset` and the trust statement version they come from.
async fn policy_of(session: &Session, asset: &str) -> Result<pb::ApprovalPolicy, Failure> {
    let mut client = session.approvals().await?;
    client
        .get_approval_policy(session.request(pb::GetApprovalPolicyRequest {
            asset: asset.to_owned(),
        }))
        .await
        .map(tonic::Response::into_inner)
        .map_err(refused(Service::Approvals))
}

/// The current policy version for the withdrawal's asset.
async fn policy_version(session: &Session, w: &pb::Withdrawal) -> Result<u64, Failure> {
    let asset = w.payload.as_ref().map(|p| p.asset.as_str()).unwrap_or("");
    Ok(policy_of(session, asset).await?.policy_version)
}

/// What to approve: the withdrawal's own hash and, only when acknowledged, its risk flags.
fn approval_request(
    w: &pb::Withdrawal,
    args: &ApproveArgs,
    key: &SigningKey,
    policy_version: u64,
) -> Result<(pb::ApproveWithdrawalRequest, ApprovalStatement), Failure> {
    check_reviewed_hash(w, args.payload_hash.as_deref())?;
    if !w.risk_flags.is_empty() && !args.ack_risk {
        let flags = risk_flags(w).join(",");
        return Err(Failure::refused_locally(
            "RISK_FLAGS_NOT_ACKNOWLEDGED",
            format!(
                "the withdrawal carries risk flags ({flags}); review it (opctl get) and approve \
                 with --ack-risk to acknowledge them explicitly"
            ),
            &[("flags", flags.clone())],
        ));
    }
    let (statement, signature) = signed_statement(
        w,
        &args.signing.tenant,
        Decision::Approve,
        key,
        policy_version,
    )?;
    Ok((
        pb::ApproveWithdrawalRequest {
            withdrawal_id: w.withdrawal_id.clone(),
            acknowledged_risk_flags: if args.ack_risk {
                w.risk_flags.clone()
            } else {
                Vec::new()
            },
            approval_statement: statement.canonical_bytes(),
            signature,
        },
        statement,
    ))
}

fn approved_report(
    w: &pb::Withdrawal,
    sent: &pb::ApproveWithdrawalRequest,
    statement: &ApprovalStatement,
    done: &pb::ApproveWithdrawalResponse,
) -> Report {
    let acknowledged: Vec<String> = sent
        .acknowledged_risk_flags
        .iter()
        .map(|f| crate::states::risk_flag_name(*f))
        .collect();
    let mut text = format!(
        "{}withdrawal     {}\nstate          {}\napprovals      {} of {}\npayload hash   {}\n\
         approver key   {}\npolicy version {}\n",
        if done.already_approved {
            "already approved by this key (it counts once)\n"
        } else {
            ""
        },
        w.withdrawal_id,
        state_name(done.state),
        done.approvals,
        done.required_approvals,
        w.payload_hash,
        statement.approver_key_id,
        statement.policy_version,
    );
    if !acknowledged.is_empty() {
        text.push_str(&format!("acknowledged   {}\n", acknowledged.join(", ")));
    }
    Report {
        text,
        json: json!({
            "withdrawal_id": w.withdrawal_id,
            "state": state_name(done.state),
            "approvals": done.approvals,
            "required_approvals": done.required_approvals,
            "already_approved": done.already_approved,
            "payload_hash": w.payload_hash,
            "approver_key_id": statement.approver_key_id.to_hex(),
            "policy_version": statement.policy_version,
            "acknowledged_risk_flags": acknowledged,
            "approve_time": done.approve_time.as_ref().map(rfc3339),
        }),
    }
}

pub async fn approve(session: &Session, out: &Output, args: &ApproveArgs) -> Result<Done, Failure> {
    // The key is checked before anything is sent.
    let key = signing_key(&args.signing)?;
    let w = fetch(session, &args.id).await?;
    let version = policy_version(session, &w).await?;
    let (request, statement) = approval_request(&w, args, &key, version)?;
    let mut client = session.approvals().await?;
    let done = client
        .approve_withdrawal(session.request(request.clone()))
        .await
        .map_err(refused(Service::Approvals))?
        .into_inner();
    out.report(&approved_report(&w, &request, &statement, &done));
    Ok(Done::Ok)
}

pub async fn reject(session: &Session, out: &Output, args: &RejectArgs) -> Result<Done, Failure> {
    let key = signing_key(&args.signing)?;
    let w = fetch(session, &args.id).await?;
    check_reviewed_hash(&w, args.payload_hash.as_deref())?;
    let version = policy_version(session, &w).await?;
    let (statement, signature) =
        signed_statement(&w, &args.signing.tenant, Decision::Reject, &key, version)?;
    let mut client = session.approvals().await?;
    let done = client
        .reject_withdrawal(session.request(pb::RejectWithdrawalRequest {
            withdrawal_id: w.withdrawal_id.clone(),
            reason: args.reason.clone(),
            approval_statement: statement.canonical_bytes(),
            signature,
        }))
        .await
        .map_err(refused(Service::Approvals))?
        .into_inner();
    let id = &w.withdrawal_id;
    out.report(&Report {
        text: format!(
            "withdrawal     {id}\nstate          {}\napprover key   {}\npolicy version {}\n",
            state_name(done.state),
            statement.approver_key_id,
            statement.policy_version,
        ),
        json: json!({
            "withdrawal_id": id,
            "state": state_name(done.state),
            "approver_key_id": statement.approver_key_id.to_hex(),
            "policy_version": statement.policy_version,
        }),
    });
    Ok(Done::Ok)
}

fn policy_report(p: &pb::ApprovalPolicy) -> Report {
    let mut text = format!(
        "asset            {}\npolicy version   {}\nkyt pass needed  {}\n",
        p.asset,
        if p.policy_version == 0 {
            "none (no trust statement published)".to_owned()
        } else {
            p.policy_version.to_string()
        },
        if p.kyt_pass_required { "yes" } else { "no" },
    );
    if p.rules.is_empty() {
        text.push_str("rules            1 approver for every amount\n");
    } else {
        text.push_str("rules            from amount  approvers\n");
        for r in &p.rules {
            text.push_str(&format!(
                "                 {:<12} {}\n",
                r.min_amount, r.required_approvals
            ));
        }
    }
    Report {
        text,
        json: json!({
            "asset": p.asset,
            "policy_version": p.policy_version,
            "kyt_pass_required": p.kyt_pass_required,
            "rules": p.rules.iter().map(|r| json!({
                "min_amount": r.min_amount,
                "required_approvals": r.required_approvals,
            })).collect::<Vec<_>>(),
        }),
    }
}

pub async fn policy(session: &Session, out: &Output, asset: &str) -> Result<Done, Failure> {
    let p = policy_of(session, asset).await?;
    out.report(&policy_report(&p));
    Ok(Done::Ok)
}

pub fn approver(out: &Output, command: &ApproverCommand) -> Result<Done, Failure> {
    match command {
        ApproverCommand::Keygen { out: path } => {
            let key = keyfile::generate(path)?;
            let public = keyfile::public_hex(&key);
            let key_id = keyfile::key_id(&key);
            out.report(&Report {
                text: format!(
                    "key file    {} (mode 0600; keep it private, it never leaves this machine)\n\
                     public key  {public}\nkey id      {key_id}\n\
                     give the public key to the tenant administrator to register it \
                     (opledger-admin trust publish --approver {public})\n",
                    path.display()
                ),
                json: json!({
                    "key_file": path.display().to_string(),
                    "public_key": public,
                    "key_id": key_id.to_hex(),
                }),
            });
            Ok(Done::Ok)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::SecretHex;

    const TENANT: &str = "0190c4c8-0000-7c6e-8f90-123456789abc";

    fn key() -> SigningKey {
        SigningKey::from_bytes(&[7; 32])
    }

    fn flagged() -> pb::Withdrawal {
        pb::Withdrawal {
            withdrawal_id: "0190c4c8-4b5d-7c6e-8f90-123456789abc".into(),
            payload_hash: "ab".repeat(32),
            state: pb::WithdrawalState::Requested as i32,
            risk_flags: vec![pb::RiskFlag::SameDestinationAndAmount as i32],
            ..Default::default()
        }
    }

    fn signing() -> SigningArgs {
        SigningArgs {
            key_file: None,
            approver_signing_key: None,
            tenant: TENANT.into(),
        }
    }

    fn args(ack_risk: bool, payload_hash: Option<&str>) -> ApproveArgs {
        ApproveArgs {
            id: "0190c4c8-4b5d-7c6e-8f90-123456789abc".into(),
            ack_risk,
            payload_hash: payload_hash.map(str::to_owned),
            signing: signing(),
        }
    }

    #[test]
    fn risk_flags_need_an_explicit_acknowledgement() {
        let f = approval_request(&flagged(), &args(false, None), &key(), 1)
            .expect_err("unacknowledged");
        assert_eq!(f.exit_code(), 1);
        assert_eq!(f.reason, "RISK_FLAGS_NOT_ACKNOWLEDGED");
        assert!(f.message.contains("--ack-risk"));
        let (request, _) =
            approval_request(&flagged(), &args(true, None), &key(), 1).expect("acknowledged");
        assert_eq!(
            request.acknowledged_risk_flags,
            vec![pb::RiskFlag::SameDestinationAndAmount as i32]
        );
        let mut plain = flagged();
        plain.risk_flags.clear();
        let (request, _) = approval_request(&plain, &args(false, None), &key(), 1).expect("plain");
        assert!(request.acknowledged_risk_flags.is_empty());
    }

    #[test]
    fn the_statement_names_the_withdrawal_its_hash_the_key_and_the_policy_version() {
        let (request, statement) =
            approval_request(&flagged(), &args(true, None), &key(), 3).expect("signed");
        let decoded = ApprovalStatement::decode(&request.approval_statement).expect("canonical");
        assert_eq!(decoded, statement);
        assert_eq!(decoded.tenant_id.to_string(), TENANT);
        assert_eq!(decoded.operation_id.to_string(), flagged().withdrawal_id);
        assert_eq!(
            hex::encode(decoded.payload_hash.as_bytes()),
            "ab".repeat(32)
        );
        assert_eq!(decoded.decision, Decision::Approve);
        assert_eq!(decoded.approver_key_id, keyfile::key_id(&key()));
        assert_eq!(decoded.policy_version, 3);
        let signature = opledger_domain::approval::signature(&request.signature).expect("64 bytes");
        opledger_domain::approval::verify(
            &key().verifying_key(),
            &request.approval_statement,
            &signature,
        )
        .expect("verifies");
        let f = approval_request(&flagged(), &args(true, None), &key(), 0).expect_err("v0");
        assert_eq!(f.reason, "TRUST_STATEMENT_MISSING");
    }

    #[test]
    fn a_reviewed_hash_must_be_the_withdrawals() {
        let hash = "AB".repeat(32);
        assert!(approval_request(&flagged(), &args(true, Some(&hash)), &key(), 1).is_ok());
        let f =
            approval_request(&flagged(), &args(true, Some("00")), &key(), 1).expect_err("differs");
        assert_eq!(
            (f.reason.as_str(), f.exit_code()),
            ("PAYLOAD_HASH_MISMATCH", 1)
        );
    }

    #[test]
    fn the_key_comes_from_the_file_or_the_environment_and_is_never_quoted() {
        let f = signing_key(&signing()).expect_err("no key");
        assert_eq!(f.exit_code(), 2);
        let mut s = signing();
        let secret = "xy".repeat(32);
        s.approver_signing_key = Some(SecretHex::from_test(&secret));
        let f = signing_key(&s).expect_err("malformed");
        assert!(!f.message.contains(&secret), "{}", f.message);
        s.approver_signing_key = Some(SecretHex::from_test(&"07".repeat(32)));
        assert_eq!(signing_key(&s).expect("hex").to_bytes(), [7; 32]);
    }

    #[test]
    fn approvals_report_progress_towards_the_policy() {
        let done = pb::ApproveWithdrawalResponse {
            state: pb::WithdrawalState::Requested as i32,
            approvals: 1,
            required_approvals: 2,
            already_approved: false,
            approve_time: None,
        };
        let (sent, statement) =
            approval_request(&flagged(), &args(true, None), &key(), 2).expect("acknowledged");
        let r = approved_report(&flagged(), &sent, &statement, &done);
        assert!(r.text.contains("approvals      1 of 2"));
        assert!(r.text.contains("policy version 2"));
        assert_eq!(r.json["state"], "REQUESTED");
        assert_eq!(r.json["policy_version"], 2);
        assert_eq!(
            r.json["acknowledged_risk_flags"],
            json!(["SAME_DESTINATION_AND_AMOUNT"])
        );
    }

    #[test]
    fn a_policy_shows_its_version() {
        let r = policy_report(&pb::ApprovalPolicy {
            asset: "ETH".into(),
            rules: vec![pb::ApprovalRule {
                min_amount: "0".into(),
                required_approvals: 2,
            }],
            policy_version: 4,
            kyt_pass_required: true,
        });
        assert!(r.text.contains("policy version   4"), "{}", r.text);
        assert_eq!(r.json["policy_version"], 4);
        assert_eq!(r.json["rules"][0]["required_approvals"], 2);
    }
}
