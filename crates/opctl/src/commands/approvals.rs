//! `approve`, `reject`, `policy` (ApprovalsService; approve and reject read the withdrawal from
//! OperationsService, verify the answer against itself (`crate::review`), show what they sign and
//! sign an approval statement over their own hash locally), `approver keygen` (local only).

use super::refusal::refused;
use super::withdrawals::fetch;
use crate::cli::{ApproveArgs, ApproverCommand, RejectArgs, SigningArgs};
use crate::client::{Service, Session};
use crate::error::{Done, Failure};
use crate::keyfile;
use crate::output::{Output, Report, payload_json, reviewed_text, rfc3339, risk_flags};
use crate::review::{Reviewed, review};
use crate::states::state_name;
use opledger_domain::approval::{ApprovalStatement, Decision, SigningKey};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::PayloadHash;
use opledger_domain::risk::{RiskFlag, RiskFlags};
use opledger_proto::v1 as pb;
use serde_json::json;

/// The approver's signing key: `--key-file` wins over `OPLEDGER_APPROVER_KEY`.
pub(super) fn signing_key(signing: &SigningArgs) -> Result<SigningKey, Failure> {
    if let Some(path) = &signing.key_file {
        return keyfile::read(path);
    }
    match &signing.approver_signing_key {
        Some(hex) if !hex.expose().is_empty() => keyfile::parse(hex.expose(), "approver")
            .map_err(|what| Failure::usage(format!("OPLEDGER_APPROVER_KEY: {what}"))),
        _ => Err(Failure::usage(
            "an approver key is required to sign: --key-file FILE or OPLEDGER_APPROVER_KEY \
             (create one with `opctl approver keygen --out FILE`)",
        )),
    }
}

/// The withdrawal the approver asked for, as the operations service answered it, checked before
/// anything is sent to the approvals service: the answer verifies against itself for `tenant`
/// (same id, every shown field parses, its hash is the hash of those fields; else exit 6), and
/// the hash opctl computed is the one the approver reviewed (`--payload-hash`; else exit 1).
fn checked(
    w: &pb::Withdrawal,
    asked: &str,
    tenant: &str,
    reviewed_hash: Option<&str>,
) -> Result<Reviewed, Failure> {
    let asked: OperationId = asked
        .parse()
        .map_err(|_| Failure::usage("not a withdrawal id (a UUID)"))?;
    let reviewed = review(asked, tenant_id(tenant)?, w)?;
    if let Some(given) = reviewed_hash {
        let given = PayloadHash::from_hex(given.trim())
            .map_err(|_| Failure::usage("--payload-hash: not 64 hex digits"))?;
        if given != reviewed.hash {
            return Err(Failure::refused_locally(
                "PAYLOAD_HASH_MISMATCH",
                "the payload hash opctl computed from the withdrawal's fields is not the one \
                 given with --payload-hash; review the withdrawal again (opctl get) before \
                 deciding",
                &[("computed_hash", reviewed.hash.to_hex())],
            ));
        }
    }
    Ok(reviewed)
}

/// `--tenant` as a tenant id.
pub(super) fn tenant_id(tenant: &str) -> Result<TenantId, Failure> {
    tenant
        .parse()
        .map_err(|_| Failure::usage("--tenant: not a tenant id (a UUID)"))
}

/// The signed statement: "key K decides D for withdrawal `r.id` of the tenant, whose payload hash
/// is H, under policy version V, acknowledging the risk flags F", H being the hash opctl computed
/// and F the flags it showed, and its signature.
fn signed_statement(
    r: &Reviewed,
    decision: Decision,
    key: &SigningKey,
    policy_version: u64,
    acknowledged: RiskFlags,
) -> Result<(ApprovalStatement, Vec<u8>), Failure> {
    if policy_version == 0 {
        return Err(Failure::refused_locally(
            "TRUST_STATEMENT_MISSING",
            "the tenant has no published trust statement: nothing can be approved yet (the \
             tenant administrator publishes one with `opledger-admin trust publish`)",
            &[],
        ));
    }
    let statement = ApprovalStatement {
        tenant_id: r.payload.tenant_id,
        operation_id: r.id,
        payload_hash: r.hash,
        decision,
        approver_key_id: keyfile::key_id(key),
        policy_version,
        acknowledged,
    };
    let signature = statement
        .sign(key)
        .map_err(|e| Failure::usage(format!("cannot sign the approval statement: {e}")))?;
    Ok((statement, signature.to_bytes().to_vec()))
}

/// The tenant's rules for `asset` and the trust statement version they come from.
pub(super) async fn policy_of(
    session: &Session,
    asset: &str,
) -> Result<pb::ApprovalPolicy, Failure> {
    let mut client = session.approvals().await?;
    client
        .get_approval_policy(session.request(pb::GetApprovalPolicyRequest {
            asset: asset.to_owned(),
        }))
        .await
        .map(tonic::Response::into_inner)
        .map_err(refused(Service::Approvals))
}

/// The current policy version for the reviewed withdrawal's asset.
async fn policy_version(session: &Session, r: &Reviewed) -> Result<u64, Failure> {
    Ok(policy_of(session, r.payload.asset.as_str())
        .await?
        .policy_version)
}

/// The risk flags shown to the approver, as the signed statement names them; refuses locally
/// when the withdrawal carries flags the approver did not acknowledge, or one this opctl does not
/// know (it cannot sign for what it cannot show).
fn check_risk_flags(w: &pb::Withdrawal, ack_risk: bool) -> Result<RiskFlags, Failure> {
    let mut shown = RiskFlags::EMPTY;
    for &raw in &w.risk_flags {
        let known = match pb::RiskFlag::try_from(raw) {
            Ok(pb::RiskFlag::SameDestinationAndAmount) => Some(RiskFlag::SameDestinationAndAmount),
            Ok(pb::RiskFlag::Unspecified) | Err(_) => None,
        };
        let Some(flag) = known else {
            let name = crate::states::risk_flag_name(raw);
            return Err(Failure::refused_locally(
                "RISK_FLAG_UNKNOWN",
                format!(
                    "the withdrawal carries a risk flag this opctl does not know ({name}): it \
                     cannot show it, so it will not sign for it; use a newer opctl"
                ),
                &[("flags", name.clone())],
            ));
        };
        shown = shown.with(flag);
    }
    if !shown.is_empty() && !ack_risk {
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
    Ok(if ack_risk { shown } else { RiskFlags::EMPTY })
}

/// What to approve: the reviewed withdrawal, opctl's own hash of it and, only when acknowledged,
/// its risk flags.
fn approval_request(
    w: &pb::Withdrawal,
    r: &Reviewed,
    args: &ApproveArgs,
    key: &SigningKey,
    policy_version: u64,
) -> Result<(pb::ApproveWithdrawalRequest, ApprovalStatement), Failure> {
    let acknowledged = check_risk_flags(w, args.ack_risk)?;
    let (statement, signature) =
        signed_statement(r, Decision::Approve, key, policy_version, acknowledged)?;
    Ok((
        pb::ApproveWithdrawalRequest {
            withdrawal_id: r.id.to_string(),
            acknowledged_risk_flags: acknowledged
                .iter()
                .map(|f| match f {
                    RiskFlag::SameDestinationAndAmount => {
                        pb::RiskFlag::SameDestinationAndAmount as i32
                    }
                })
                .collect(),
            approval_statement: statement.canonical_bytes(),
            signature,
        },
        statement,
    ))
}

fn approved_report(
    r: &Reviewed,
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
        r.id,
        state_name(done.state),
        done.approvals,
        done.required_approvals,
        r.hash,
        statement.approver_key_id,
        statement.policy_version,
    );
    if !acknowledged.is_empty() {
        text.push_str(&format!("acknowledged   {}\n", acknowledged.join(", ")));
    }
    Report {
        text,
        json: json!({
            "withdrawal_id": r.id.to_string(),
            "state": state_name(done.state),
            "approvals": done.approvals,
            "required_approvals": done.required_approvals,
            "already_approved": done.already_approved,
            "payload_hash": r.hash.to_hex(),
            "payload": payload_json(&r.payload),
            "approver_key_id": statement.approver_key_id.to_hex(),
            "policy_version": statement.policy_version,
            "acknowledged_risk_flags": acknowledged,
            "approve_time": done.approve_time.as_ref().map(rfc3339),
        }),
    }
}

/// Shows what is about to be signed (text output; `--json` puts it in the result).
fn show(out: &Output, decision: &str, r: &Reviewed) {
    if !out.json {
        out.text(&reviewed_text(decision, r));
    }
}

pub async fn approve(session: &Session, out: &Output, args: &ApproveArgs) -> Result<Done, Failure> {
    // The key is checked before anything is sent.
    let key = signing_key(&args.signing)?;
    let w = fetch(session, &args.id).await?;
    let r = checked(
        &w,
        &args.id,
        &args.signing.tenant,
        args.payload_hash.as_deref(),
    )?;
    let version = policy_version(session, &r).await?;
    let (request, statement) = approval_request(&w, &r, args, &key, version)?;
    show(out, "APPROVE", &r);
    let mut client = session.approvals().await?;
    let done = client
        .approve_withdrawal(session.request(request.clone()))
        .await
        .map_err(refused(Service::Approvals))?
        .into_inner();
    out.report(&approved_report(&r, &request, &statement, &done));
    Ok(Done::Ok)
}

pub async fn reject(session: &Session, out: &Output, args: &RejectArgs) -> Result<Done, Failure> {
    let key = signing_key(&args.signing)?;
    let w = fetch(session, &args.id).await?;
    let r = checked(
        &w,
        &args.id,
        &args.signing.tenant,
        args.payload_hash.as_deref(),
    )?;
    let version = policy_version(session, &r).await?;
    let (statement, signature) =
        signed_statement(&r, Decision::Reject, &key, version, RiskFlags::EMPTY)?;
    show(out, "REJECT", &r);
    let mut client = session.approvals().await?;
    let done = client
        .reject_withdrawal(session.request(pb::RejectWithdrawalRequest {
            withdrawal_id: r.id.to_string(),
            reason: args.reason.clone(),
            approval_statement: statement.canonical_bytes(),
            signature,
        }))
        .await
        .map_err(refused(Service::Approvals))?
        .into_inner();
    let id = r.id;
    out.report(&Report {
        text: format!(
            "withdrawal     {id}\nstate          {}\npayload hash   {}\napprover key   {}\n\
             policy version {}\n",
            state_name(done.state),
            r.hash,
            statement.approver_key_id,
            statement.policy_version,
        ),
        json: json!({
            "withdrawal_id": id.to_string(),
            "state": state_name(done.state),
            "payload_hash": r.hash.to_hex(),
            "payload": payload_json(&r.payload),
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
    use opledger_domain::amount::Amount;
    use opledger_domain::payload::WithdrawalPayload;
    use opledger_domain::payload::{AccountName, AssetCode, Destination, NetworkId};

    const TENANT: &str = "0190c4c8-0000-7c6e-8f90-123456789abc";
    const ID: &str = "0190c4c8-4b5d-7c6e-8f90-123456789abc";

    fn key() -> SigningKey {
        SigningKey::from_bytes(&[7; 32])
    }

    fn stored(to: &str, amount: &str) -> WithdrawalPayload {
        WithdrawalPayload {
            tenant_id: TENANT.parse().expect("uuid"),
            source_account: AccountName::parse("treasury").expect("account"),
            asset: AssetCode::parse("ETH").expect("asset"),
            network: NetworkId::parse("anvil").expect("network"),
            destination: Destination::parse(to).expect("destination"),
            memo: None,
            amount: Amount::parse(amount).expect("amount"),
            fee_cap: Amount::parse("100").expect("fee cap"),
            policy_version: 1,
        }
    }

    /// The operations service's answer showing `shown` with the hash of `hashed`.
    fn answer(shown: &WithdrawalPayload, hashed: &WithdrawalPayload) -> pb::Withdrawal {
        pb::Withdrawal {
            withdrawal_id: ID.into(),
            payload: Some(pb::WithdrawalPayload {
                source_account: shown.source_account.as_str().into(),
                asset: shown.asset.as_str().into(),
                network: shown.network.as_str().into(),
                destination: shown.destination.as_str().into(),
                memo: None,
                amount: shown.amount.to_string(),
                fee_cap: shown.fee_cap.to_string(),
                policy_version: shown.policy_version,
            }),
            payload_hash: hashed.hash().to_hex(),
            state: pb::WithdrawalState::Requested as i32,
            risk_flags: vec![pb::RiskFlag::SameDestinationAndAmount as i32],
            ..Default::default()
        }
    }

    fn harmless() -> WithdrawalPayload {
        stored("0x70997970c51812dc3a010c7d01b50e0d17dc79c8", "5000")
    }

    fn flagged() -> pb::Withdrawal {
        answer(&harmless(), &harmless())
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
            id: ID.into(),
            ack_risk,
            payload_hash: payload_hash.map(str::to_owned),
            signing: signing(),
        }
    }

    /// `checked` then `approval_request`, as `approve` runs them.
    fn request(
        w: &pb::Withdrawal,
        args: &ApproveArgs,
        version: u64,
    ) -> Result<(pb::ApproveWithdrawalRequest, ApprovalStatement), Failure> {
        let r = checked(
            w,
            &args.id,
            &args.signing.tenant,
            args.payload_hash.as_deref(),
        )?;
        approval_request(w, &r, args, &key(), version)
    }

    #[test]
    fn risk_flags_need_an_explicit_acknowledgement() {
        let f = request(&flagged(), &args(false, None), 1).expect_err("unacknowledged");
        assert_eq!(f.exit_code(), 1);
        assert_eq!(f.reason, "RISK_FLAGS_NOT_ACKNOWLEDGED");
        assert!(f.message.contains("--ack-risk"));
        let (request_sent, _) = request(&flagged(), &args(true, None), 1).expect("acknowledged");
        assert_eq!(
            request_sent.acknowledged_risk_flags,
            vec![pb::RiskFlag::SameDestinationAndAmount as i32]
        );
        let mut plain = flagged();
        plain.risk_flags.clear();
        let (request_sent, _) = request(&plain, &args(false, None), 1).expect("plain");
        assert!(request_sent.acknowledged_risk_flags.is_empty());
    }

    #[test]
    fn the_statement_names_the_withdrawal_its_own_hash_the_key_and_the_policy_version() {
        let (sent, statement) = request(&flagged(), &args(true, None), 3).expect("signed");
        let decoded = ApprovalStatement::decode(&sent.approval_statement).expect("canonical");
        assert_eq!(decoded, statement);
        assert_eq!(decoded.tenant_id.to_string(), TENANT);
        assert_eq!(decoded.operation_id.to_string(), ID);
        assert_eq!(sent.withdrawal_id, ID);
        assert_eq!(decoded.payload_hash, harmless().hash());
        assert_eq!(decoded.decision, Decision::Approve);
        assert_eq!(decoded.approver_key_id, keyfile::key_id(&key()));
        assert_eq!(decoded.policy_version, 3);
        let signature = opledger_domain::approval::signature(&sent.signature).expect("64 bytes");
        opledger_domain::approval::verify(
            &key().verifying_key(),
            &sent.approval_statement,
            &signature,
        )
        .expect("verifies");
        let f = request(&flagged(), &args(true, None), 0).expect_err("v0");
        assert_eq!(f.reason, "TRUST_STATEMENT_MISSING");
    }

    /// Issue 25, finding 1, as the approver's tool: the operations host shows a harmless payload
    /// with the stored hash of its own withdrawal to the attacker. Nothing is signed (exit 6).
    #[test]
    fn lying_operations_host_gets_no_signature_from_opctl() {
        let attackers = stored("0x000000000000000000000000000000000000dead", "9000000000");
        let lie = answer(&harmless(), &attackers);
        for reviewed in [None, Some(attackers.hash().to_hex())] {
            let f = request(&lie, &args(true, reviewed.as_deref()), 1).expect_err("a lie");
            assert_eq!(
                (f.reason.as_str(), f.exit_code()),
                ("DISPLAYED_PAYLOAD_MISMATCH", 6)
            );
            assert_eq!(f.metadata["answered_hash"], attackers.hash().to_hex());
            assert_eq!(f.metadata["computed_hash"], harmless().hash().to_hex());
        }
        let mut other = flagged();
        other.withdrawal_id = "0190c4c8-4b5d-7c6e-8f90-cba987654321".into();
        let f = request(&other, &args(true, None), 1).expect_err("another withdrawal");
        assert_eq!(
            (f.reason.as_str(), f.exit_code()),
            ("WITHDRAWAL_ID_MISMATCH", 6)
        );
        // Rejections are checked the same way.
        let f = checked(&lie, ID, TENANT, None).expect_err("a lie");
        assert_eq!(f.reason, "DISPLAYED_PAYLOAD_MISMATCH");
    }

    #[test]
    fn a_reviewed_hash_must_be_the_one_opctl_computes() {
        let hash = harmless().hash().to_hex().to_ascii_uppercase();
        assert!(request(&flagged(), &args(true, Some(&hash)), 1).is_ok());
        let other = stored("0x70997970c51812dc3a010c7d01b50e0d17dc79c8", "5001")
            .hash()
            .to_hex();
        let f = request(&flagged(), &args(true, Some(&other)), 1).expect_err("differs");
        assert_eq!(
            (f.reason.as_str(), f.exit_code()),
            ("PAYLOAD_HASH_MISMATCH", 1)
        );
        let f = request(&flagged(), &args(true, Some("00")), 1).expect_err("malformed");
        assert_eq!(f.exit_code(), 2);
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
    fn approvals_report_progress_towards_the_policy_and_the_payload_signed() {
        let done = pb::ApproveWithdrawalResponse {
            state: pb::WithdrawalState::Requested as i32,
            approvals: 1,
            required_approvals: 2,
            already_approved: false,
            approve_time: None,
        };
        let w = flagged();
        let r = checked(&w, ID, TENANT, None).expect("honest");
        let (sent, statement) =
            approval_request(&w, &r, &args(true, None), &key(), 2).expect("acknowledged");
        let report = approved_report(&r, &sent, &statement, &done);
        assert!(report.text.contains("approvals      1 of 2"));
        assert!(report.text.contains("policy version 2"));
        assert_eq!(report.json["state"], "REQUESTED");
        assert_eq!(report.json["policy_version"], 2);
        assert_eq!(report.json["payload_hash"], harmless().hash().to_hex());
        assert_eq!(report.json["payload"]["amount"], "5000");
        assert_eq!(report.json["payload"]["tenant_id"], TENANT);
        assert_eq!(
            report.json["acknowledged_risk_flags"],
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
