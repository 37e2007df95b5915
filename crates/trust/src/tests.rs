//! The pure verification: valid approvals, wrong keys, rollbacks, missing roots and statements,
//! decisions naming another payload, the policy's outcomes, signed screenings and the
//! configuration section's checks.

use crate::{Evidence, TrustRootConfig, TrustRoots, Unverified, check_trust_roots};
use ed25519_dalek::Signer as _;
use opledger_config::ConfigError;
use opledger_domain::amount::Amount;
use opledger_domain::approval::{
    ApprovalStatement, Decision, KeyId, KeyKind, Refusal, RegisteredKey, SigningKey, TrustParts,
    TrustStatement,
};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::{
    AccountName, AssetCode, Destination, NetworkId, PayloadHash, WithdrawalPayload,
};
use opledger_domain::risk::{RiskFlag, RiskFlags};
use opledger_store::trust::{SignedScreening, StoredDecision, StoredTrust};

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

const ADMIN: u8 = 1;
const OTHER_ADMIN: u8 = 2;
const APPROVER_A: u8 = 10;
const APPROVER_B: u8 = 11;
const UNREGISTERED: u8 = 12;
const KYT: u8 = 20;

/// One withdrawal of a tenant and everything stored about it.
struct Case {
    tenant: TenantId,
    op: OperationId,
    payload: WithdrawalPayload,
    stored_hash: PayloadHash,
    risk_flags: Vec<RiskFlag>,
    decisions: Vec<StoredDecision>,
    screenings: Vec<SignedScreening>,
    trust: Option<StoredTrust>,
    trust_seen: Option<u64>,
}

impl Case {
    /// A withdrawal of 1 ETH approved by approver A under version 1, signed by the admin key.
    fn approved() -> Case {
        let tenant = TenantId::new();
        let payload = WithdrawalPayload {
            tenant_id: tenant,
            source_account: AccountName::parse("treasury").expect("account"),
            asset: AssetCode::parse("ETH").expect("asset"),
            network: NetworkId::parse("anvil").expect("network"),
            destination: Destination::parse("0x52908400098527886E0F7030069857D2E4169EE7")
                .expect("destination"),
            memo: None,
            amount: Amount::new(1_000_000_000_000_000_000),
            fee_cap: Amount::ZERO,
            policy_version: 1,
        };
        let mut case = Case {
            tenant,
            op: OperationId::new(),
            stored_hash: payload.hash(),
            payload,
            risk_flags: Vec::new(),
            decisions: Vec::new(),
            screenings: Vec::new(),
            trust: None,
            trust_seen: None,
        };
        case.trust = Some(case.statement(1, ADMIN, Vec::new()));
        case.decisions = vec![case.decision(APPROVER_A, Decision::Approve)];
        case
    }

    /// Version `version` of the tenant's trust statement (approvers A and B, one KYT key, a KYT
    /// pass required for `kyt_required`), signed by key `signer`.
    fn statement(&self, version: u64, signer: u8, kyt_required: Vec<AssetCode>) -> StoredTrust {
        let registered = |seed, kind| RegisteredKey::new(key(seed).verifying_key(), kind);
        let parts = TrustParts {
            keys: vec![
                registered(APPROVER_A, KeyKind::Approver),
                registered(APPROVER_B, KeyKind::Approver),
                registered(KYT, KeyKind::Kyt),
            ],
            kyt_required,
            ..TrustParts::default()
        };
        let statement = TrustStatement::new(self.tenant, version, parts).expect("statement");
        StoredTrust {
            version,
            statement: statement.canonical_bytes(),
            signature: statement.sign(&key(signer)).to_bytes().to_vec(),
        }
    }

    /// A decision of approver `approver` over the stored payload's hash.
    fn decision(&self, approver: u8, decision: Decision) -> StoredDecision {
        self.signed(
            approver,
            approver,
            decision,
            self.payload.hash(),
            RiskFlags::EMPTY,
        )
    }

    /// A decision naming approver `named` and `hash`, acknowledging `acknowledged`, signed by
    /// key `signer`, as the approvals table stores it.
    fn signed(
        &self,
        named: u8,
        signer: u8,
        decision: Decision,
        hash: PayloadHash,
        acknowledged: RiskFlags,
    ) -> StoredDecision {
        let statement = ApprovalStatement {
            tenant_id: self.tenant,
            operation_id: self.op,
            payload_hash: hash,
            decision,
            approver_key_id: KeyId::of(&key(named).verifying_key()),
            policy_version: 1,
            acknowledged,
        };
        let signature = if named == signer {
            statement.sign(&key(signer)).expect("sign")
        } else {
            // A forgery: the domain refuses to sign for another key, so sign the bytes directly.
            key(signer).sign(&statement.canonical_bytes())
        };
        StoredDecision {
            approver_key_id: Some(statement.approver_key_id.to_hex()),
            decision: decision.as_str().to_owned(),
            policy_version: Some(1),
            payload_hash: hash.as_bytes().to_vec(),
            signature: Some(signature.to_bytes().to_vec()),
            acknowledged_flags: acknowledged.iter().map(|f| f.as_str().to_owned()).collect(),
        }
    }

    /// A `kyt.result` about `op` with `verdict`, signed by the KYT key as the inbox stores it.
    fn screening(&self, op: OperationId, verdict: &str) -> SignedScreening {
        let body = format!(
            r#"{{"type":"kyt.result","data":{{"operation_id":"{op}","result":"{verdict}","provider_ref":"chk-1"}}}}"#
        )
        .into_bytes();
        let (event_id, signed_at) = ("msg_1".to_owned(), 1_700_000_000_i64);
        let content =
            opledger_webhook::verify::signed_content(&event_id, &signed_at.to_string(), &body);
        SignedScreening {
            signature: key(KYT).sign(&content).to_bytes().to_vec(),
            event_id,
            signed_at,
            body,
        }
    }

    fn evidence(&self) -> Evidence<'_> {
        Evidence {
            payload: &self.payload,
            payload_hash: self.stored_hash,
            risk_flags: &self.risk_flags,
            decisions: &self.decisions,
            screenings: &self.screenings,
            trust: self.trust.as_ref(),
            trust_seen: self.trust_seen,
        }
    }

    /// The root pinning `admin` for this tenant, from `min_version`.
    fn root(&self, admin: u8, min_version: u64) -> TrustRootConfig {
        TrustRootConfig {
            tenant_id: self.tenant.to_string(),
            admin_public_keys: vec![hex::encode(key(admin).verifying_key().as_bytes())],
            min_version,
        }
    }

    fn roots(&self) -> TrustRoots {
        TrustRoots::new(&[self.root(ADMIN, 1)])
    }

    fn verify(&self, roots: &TrustRoots) -> Result<Option<u64>, Unverified> {
        roots
            .verify(self.tenant, self.op, &self.evidence())
            .map(|a| a.newly_accepted)
    }
}

#[test]
fn a_valid_approval_verifies_and_a_new_statement_version_is_reported_once_recorded() {
    let mut case = Case::approved();
    assert!(case.evidence().payload_hash_approved());
    let roots = case.roots();
    assert_eq!(case.verify(&roots), Ok(Some(1)));
    // Once the caller recorded version 1 as accepted, nothing new is reported.
    case.trust_seen = Some(1);
    assert_eq!(case.verify(&roots), Ok(None));
    // Two approvers, both counted, are as good as one.
    case.decisions
        .push(case.decision(APPROVER_B, Decision::Approve));
    assert_eq!(case.verify(&roots), Ok(None));
}

#[test]
fn a_trust_statement_not_signed_by_a_pinned_key_is_refused() {
    let mut case = Case::approved();
    case.trust = Some(case.statement(1, OTHER_ADMIN, Vec::new()));
    assert_eq!(case.verify(&case.roots()), Err(Unverified::TrustNotSigned));
    // Pinning that key instead accepts it: the pinned keys decide, nothing stored does.
    let pinned = TrustRoots::new(&[case.root(OTHER_ADMIN, 1)]);
    assert_eq!(case.verify(&pinned), Ok(Some(1)));
    // A malformed signature, and a stored version the signed bytes do not carry.
    let mut stored = case.statement(1, ADMIN, Vec::new());
    stored.signature.truncate(10);
    case.trust = Some(stored);
    assert_eq!(case.verify(&case.roots()), Err(Unverified::TrustNotSigned));
    let mut stored = case.statement(1, ADMIN, Vec::new());
    stored.version = 2;
    case.trust = Some(stored);
    assert_eq!(case.verify(&case.roots()), Err(Unverified::TrustNotSigned));
}

#[test]
fn an_approval_signed_by_a_wrong_key_is_refused() {
    let mut case = Case::approved();
    let hash = case.payload.hash();
    // Names approver A, signed by approver B.
    case.decisions = vec![case.signed(
        APPROVER_A,
        APPROVER_B,
        Decision::Approve,
        hash,
        RiskFlags::EMPTY,
    )];
    let key_id = KeyId::of(&key(APPROVER_A).verifying_key());
    assert_eq!(
        case.verify(&case.roots()),
        Err(Unverified::Refused(Refusal::BadSignature { key_id }))
    );
    // A key the trust statement does not register.
    case.decisions = vec![case.decision(UNREGISTERED, Decision::Approve)];
    let key_id = KeyId::of(&key(UNREGISTERED).verifying_key());
    assert_eq!(
        case.verify(&case.roots()),
        Err(Unverified::Refused(Refusal::UnknownKey { key_id }))
    );
    // A stored decision without its signature can never count.
    case.decisions = vec![case.decision(APPROVER_A, Decision::Approve)];
    case.decisions[0].signature = None;
    assert_eq!(
        case.verify(&case.roots()),
        Err(Unverified::UnsignedDecision)
    );
}

#[test]
fn a_rolled_back_statement_is_refused() {
    let mut case = Case::approved();
    let version_1 = case.trust.clone();
    case.trust = Some(case.statement(2, ADMIN, Vec::new()));
    let roots = case.roots();
    assert_eq!(case.verify(&roots), Ok(Some(2)));
    // The same process (any clone of its roots) accepted version 2: version 1 is a rollback,
    // even though the caller recorded nothing yet.
    case.trust = version_1.clone();
    assert_eq!(case.verify(&roots), Err(Unverified::TrustRolledBack));
    assert_eq!(
        case.verify(&roots.clone()),
        Err(Unverified::TrustRolledBack)
    );
    // A fresh process refuses it below the version recorded as accepted...
    case.trust_seen = Some(2);
    assert_eq!(case.verify(&case.roots()), Err(Unverified::TrustRolledBack));
    // ...and below the pinned minimum, even on a fresh database.
    case.trust_seen = None;
    let pinned_from_2 = TrustRoots::new(&[case.root(ADMIN, 2)]);
    assert_eq!(
        case.verify(&pinned_from_2),
        Err(Unverified::TrustRolledBack)
    );
    assert_eq!(case.verify(&case.roots()), Ok(Some(1)));
}

#[test]
fn a_tenant_without_a_trust_root_or_a_trust_statement_is_refused() {
    let mut case = Case::approved();
    let elsewhere = Case::approved();
    assert_eq!(
        case.verify(&elsewhere.roots()),
        Err(Unverified::NoTrustRoot)
    );
    assert_eq!(
        case.verify(&TrustRoots::new(&[])),
        Err(Unverified::NoTrustRoot)
    );
    // An entry that does not parse pins nothing (the configuration's validation refuses it).
    let mut garbled = case.root(ADMIN, 1);
    garbled.tenant_id = "not a tenant".into();
    assert_eq!(
        case.verify(&TrustRoots::new(&[garbled])),
        Err(Unverified::NoTrustRoot)
    );
    case.trust = None;
    assert_eq!(
        case.verify(&case.roots()),
        Err(Unverified::NoTrustStatement)
    );
}

#[test]
fn a_decision_naming_another_payload_hash_is_refused() {
    let mut case = Case::approved();
    let other = PayloadHash::from_bytes([7; 32]);
    case.decisions = vec![case.signed(
        APPROVER_A,
        APPROVER_A,
        Decision::Approve,
        other,
        RiskFlags::EMPTY,
    )];
    assert!(!case.evidence().payload_hash_approved());
    let key_id = KeyId::of(&key(APPROVER_A).verifying_key());
    assert_eq!(
        case.verify(&case.roots()),
        Err(Unverified::Refused(Refusal::OtherOperation { key_id }))
    );
    // A stored hash the stored fields do not hash to, and no decision at all, are not approved.
    let mut case = Case::approved();
    case.stored_hash = other;
    assert!(!case.evidence().payload_hash_approved());
    let mut case = Case::approved();
    case.decisions.clear();
    assert!(!case.evidence().payload_hash_approved());
    assert_eq!(case.verify(&case.roots()), Err(Unverified::Insufficient));
}

#[test]
fn the_policy_refuses_a_rejection_and_approvals_that_do_not_acknowledge_the_risk_flags() {
    let mut case = Case::approved();
    case.decisions
        .push(case.decision(APPROVER_B, Decision::Reject));
    assert_eq!(case.verify(&case.roots()), Err(Unverified::Rejected));
    let mut case = Case::approved();
    case.risk_flags = vec![RiskFlag::SameDestinationAndAmount];
    assert_eq!(
        case.verify(&case.roots()),
        Err(Unverified::RiskNotAcknowledged)
    );
    let flags = RiskFlags::EMPTY.with(RiskFlag::SameDestinationAndAmount);
    let hash = case.payload.hash();
    case.decisions = vec![case.signed(APPROVER_A, APPROVER_A, Decision::Approve, hash, flags)];
    assert_eq!(case.verify(&case.roots()), Ok(Some(1)));
}

#[test]
fn signed_screenings_decide_an_asset_that_requires_a_kyt_pass() {
    let mut case = Case::approved();
    let eth = vec![AssetCode::parse("ETH").expect("asset")];
    case.trust = Some(case.statement(1, ADMIN, eth));
    assert_eq!(case.verify(&case.roots()), Err(Unverified::KytMissing));
    case.screenings = vec![case.screening(case.op, "pass")];
    assert_eq!(case.verify(&case.roots()), Ok(Some(1)));
    case.screenings.push(case.screening(case.op, "fail"));
    assert_eq!(case.verify(&case.roots()), Err(Unverified::KytFailed));
    case.screenings = vec![case.screening(OperationId::new(), "pass")];
    assert!(matches!(
        case.verify(&case.roots()),
        Err(Unverified::KytMisplaced(_))
    ));
    // A signed failure refuses an asset that requires no pass too.
    let mut case = Case::approved();
    case.screenings = vec![case.screening(case.op, "fail")];
    assert_eq!(case.verify(&case.roots()), Err(Unverified::KytFailed));
}

#[test]
fn refusals_carry_a_fixed_detail_naming_screenings_or_approvals() {
    assert!(Unverified::KytMissing.detail().contains("screening"));
    assert!(Unverified::KytFailed.detail().contains("screening"));
    assert!(Unverified::TrustRolledBack.detail().contains("trust root"));
    assert!(Unverified::Insufficient.detail().contains("trust root"));
}

fn refused(roots: &[TrustRootConfig]) -> &'static str {
    match check_trust_roots(roots) {
        Err(ConfigError::Invalid { field, .. }) => field,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn the_trust_roots_section_is_checked_entry_by_entry() {
    let case = Case::approved();
    let mut upper = case.root(ADMIN, 1);
    upper.tenant_id = upper.tenant_id.to_ascii_uppercase();
    let rooted = check_trust_roots(std::slice::from_ref(&upper)).expect("valid");
    assert_eq!(
        rooted.into_iter().collect::<Vec<_>>(),
        [case.tenant.to_string()]
    );
    assert!(check_trust_roots(&[]).expect("empty").is_empty());
    assert_eq!(
        refused(&[case.root(ADMIN, 1), upper]),
        "trust_roots.tenant_id"
    );
    let mut r = case.root(ADMIN, 1);
    r.tenant_id = "acme".into();
    assert_eq!(refused(&[r]), "trust_roots.tenant_id");
    let mut r = case.root(ADMIN, 1);
    r.admin_public_keys.clear();
    assert_eq!(refused(&[r]), "trust_roots.admin_public_keys");
    let mut r = case.root(ADMIN, 1);
    r.admin_public_keys.push("ab".repeat(31));
    assert_eq!(refused(&[r]), "trust_roots.admin_public_keys");
    assert_eq!(refused(&[case.root(ADMIN, 0)]), "trust_roots.min_version");
}
