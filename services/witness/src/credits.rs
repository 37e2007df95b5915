//! The witness's credit pass: every proposed credit it has not decided yet is judged from what the
//! witness verifies itself, and attested only then (migration 29: the attestation and the credit
//! are one transaction, `opledger_attest_credit`).
//!
//! - A deposit with chain evidence: the witness's own endpoints must show exactly that transfer
//!   (asset, recipient, amount) at final depth, to an address registered to the credit's account
//!   ([`opledger_domain::witness::deposit::judge_deposit`]).
//! - A deposit without chain evidence, and an operator credit: enough distinct operators' signed
//!   credit statements over exactly the credit's fields, under the tenant's newest trust statement
//!   signed by a pinned administrator key ([`opledger_domain::approval::evaluate_credit`]).
//!
//! Nothing that cannot be read or verified now is ever refused or attested: it stays pending and
//! is read again next pass (absence of evidence never credits). A proposal its evidence
//! contradicts, or an operator credit with a statement that does not verify, is refused for good
//! (a security signal); on a deposit, whose statements come from another login than its
//! proposal, a statement that does not verify is left out and logged instead.

use crate::attest::WitnessError;
use crate::config::{Config, TrustRootConfig, token_address};
use crate::outcome::Outcome;
use alloy_primitives::B256;
use opledger_chain::evidence::{EvidenceReader, NoAgreement, Pinned, Pins};
use opledger_domain::approval::{
    CreditFacts, CreditSignatureFacts, CreditVerdict, Signature, TrustStatement, VerifyingKey,
    check_credit_signature, evaluate_credit, signature, verifying_key,
};
use opledger_domain::evidence::content::Asset;
use opledger_domain::ids::TenantId;
use opledger_domain::witness::deposit::{DepositClaim, DepositVerdict, judge_deposit};
use opledger_store::StoreError;
use opledger_store::credits::{
    CreditCursor, CreditKind, CreditRecord, CreditToWitness, DepositEvidence,
};
use opledger_store::roles::WitnessStore;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use tracing::Instrument as _;

/// The pinned roots of the tenants this witness verifies statements for, and the newest trust
/// statement version accepted per tenant (a rollback to an older one is refused).
#[derive(Debug, Default)]
pub struct Roots {
    roots: HashMap<TenantId, (Vec<VerifyingKey>, u64)>,
    accepted: Mutex<HashMap<TenantId, u64>>,
}

impl Roots {
    /// The roots of a validated configuration.
    pub fn new(configured: &[TrustRootConfig]) -> Roots {
        let roots = configured
            .iter()
            .filter_map(|root| {
                let tenant = TenantId::from_uuid(root.tenant_id.parse().ok()?);
                let keys = root
                    .admin_public_keys
                    .iter()
                    .filter_map(|k| verifying_key(&hex::decode(k).ok()?).ok())
                    .collect();
                Some((tenant, (keys, root.min_version)))
            })
            .collect();
        Roots {
            roots,
            accepted: Mutex::new(HashMap::new()),
        }
    }

    /// The tenant's newest stored trust statement, if signed by a pinned key and not older than
    /// one accepted before. `Ok(None)`: no root pinned or no statement stored (nothing to decide
    /// now). `Err(reason)`: the stored statement must not be trusted.
    async fn trust(
        &self,
        store: &WitnessStore,
        tenant: TenantId,
    ) -> Result<Result<Option<TrustStatement>, &'static str>, StoreError> {
        let Some((keys, min_version)) = self.roots.get(&tenant) else {
            return Ok(Ok(None));
        };
        let Some(stored) = store.trust_statement(tenant).await? else {
            return Ok(Ok(None));
        };
        let Ok(sig): Result<Signature, _> = signature(&stored.signature) else {
            return Ok(Err("TRUST_STATEMENT_NOT_SIGNED"));
        };
        let Ok(trust) = TrustStatement::verify_signed(&stored.statement, &sig, tenant, keys) else {
            return Ok(Err("TRUST_STATEMENT_NOT_SIGNED"));
        };
        let mut accepted = self.accepted.lock().unwrap_or_else(PoisonError::into_inner);
        let floor = (*min_version).max(accepted.get(&tenant).copied().unwrap_or(0));
        if trust.version() != stored.version || trust.version() < floor {
            return Ok(Err("TRUST_STATEMENT_ROLLED_BACK"));
        }
        accepted.insert(tenant, trust.version());
        Ok(Ok(Some(trust)))
    }
}

/// The witness's credit pass.
#[derive(Debug, Clone)]
pub struct CreditWitness {
    store: WitnessStore,
    networks: Arc<HashMap<String, EvidenceReader>>,
    assets: Arc<BTreeMap<String, crate::config::DepositAssets>>,
    roots: Arc<Roots>,
    witness_id: String,
    /// Where the next pass reads the queue from (`None`: from the oldest).
    cursor: Arc<Mutex<Option<CreditCursor>>>,
}

impl CreditWitness {
    /// A credit pass over `store` reading `networks` (the witness's own endpoints).
    pub fn new(
        config: &Config,
        store: WitnessStore,
        networks: Arc<HashMap<String, EvidenceReader>>,
    ) -> CreditWitness {
        CreditWitness {
            store,
            networks,
            assets: Arc::new(config.deposit_assets.clone()),
            roots: Arc::new(Roots::new(&config.trust_roots)),
            witness_id: config.witness_id.clone(),
            cursor: Arc::new(Mutex::new(None)),
        }
    }

    /// One pass over the next `limit` undecided credits of the queue (round robin: a page after
    /// the previous pass's last, from the oldest again once the end was reached); each network
    /// pinned once.
    pub async fn tick(&self, limit: u32) -> Vec<Outcome> {
        let after = self
            .cursor
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut page = self.store.credits_to_witness(after.as_ref(), limit).await;
        if after.is_some() && page.as_ref().is_ok_and(Vec::is_empty) {
            page = self.store.credits_to_witness(None, limit).await;
        }
        let pending = match page {
            Ok(pending) => pending,
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), "cannot read proposed credits");
                return Vec::new();
            }
        };
        let next = match pending.last() {
            Some(last) if pending.len() == limit as usize => Some(last.cursor()),
            _ => None,
        };
        *self.cursor.lock().unwrap_or_else(PoisonError::into_inner) = next;
        let mut pins = Pins::default();
        let mut outcomes = Vec::with_capacity(pending.len());
        for credit in &pending {
            // No identifier on the span: the credit id is a key digest, the evidence a
            // transaction reference; its kind and outcome say what happened.
            let span = tracing::info_span!(
                "witness.examine_credit",
                opledger.service = "witness",
                kind = ?credit.record.kind,
                chain_evidence = credit.record.evidence.is_some(),
                outcome = tracing::field::Empty,
            );
            let outcome = async {
                match self.examine(credit, &mut pins).await {
                    Ok(outcome) => outcome,
                    Err(e) => {
                        tracing::warn!(error = %e, "credit examination deferred");
                        Outcome::NoVerdict
                    }
                }
            }
            .instrument(span.clone())
            .await;
            span.record("outcome", tracing::field::debug(outcome));
            outcomes.push(outcome);
        }
        outcomes
    }

    /// Judges one credit (pinning its network in `pins` on first use).
    pub async fn examine(
        &self,
        credit: &CreditToWitness,
        pins: &mut Pins,
    ) -> Result<Outcome, WitnessError> {
        let record = &credit.record;
        let decided = match &record.evidence {
            Some(evidence) => {
                let pinned = pins
                    .get(&evidence.network, self.networks.get(&evidence.network))
                    .await;
                self.deposit(credit, evidence, pinned).await?
            }
            None => self.statements(record).await?,
        };
        let block = match decided {
            Decided::Attest(block) => block,
            Decided::Wait(why) => {
                tracing::debug!(why, "credit left pending");
                return Ok(Outcome::NoVerdict);
            }
            Decided::Refuse(reason) => return self.refuse(record, reason).await,
        };
        let applied = match self
            .store
            .attest_credit(record.tenant_id, &record.credit_id, &self.witness_id, block)
            .await
        {
            Ok(applied) => applied,
            Err(StoreError::OutOfRange { .. }) => {
                return self.refuse(record, "CREDIT_OUT_OF_RANGE").await;
            }
            Err(e) => return Err(e.into()),
        };
        if applied {
            tracing::info!(kind = ?record.kind, "credit attested and applied");
            return Ok(Outcome::Attested);
        }
        // The database applied nothing: another witness did, or (for a deposit) the same transfer
        // was credited under another proposal.
        match self
            .store
            .credit(record.tenant_id, &record.credit_id)
            .await?
        {
            Some(now) if now.state == opledger_store::credits::CreditState::Credited => {
                Ok(Outcome::Attested)
            }
            _ if record.evidence.is_some() => self.refuse(record, "DEPOSIT_ALREADY_CREDITED").await,
            _ => Ok(Outcome::NoVerdict),
        }
    }

    async fn refuse(
        &self,
        record: &CreditRecord,
        reason: &'static str,
    ) -> Result<Outcome, WitnessError> {
        self.store
            .refuse_credit(
                record.tenant_id,
                &record.credit_id,
                reason,
                &self.witness_id,
            )
            .await?;
        tracing::error!(
            reason,
            kind = ?record.kind,
            "credit refused: the witness's evidence does not support it; nothing credited"
        );
        Ok(Outcome::Refused(reason))
    }

    async fn deposit(
        &self,
        credit: &CreditToWitness,
        evidence: &DepositEvidence,
        pinned: Option<Result<Pinned, NoAgreement>>,
    ) -> Result<Decided, WitnessError> {
        let record = &credit.record;
        match &credit.registered_to {
            None => return Ok(Decided::Wait("recipient not registered (yet)")),
            Some((tenant, account))
                if *tenant != record.tenant_id || *account != record.account =>
            {
                return Ok(Decided::Refuse("DEPOSIT_ADDRESS_OF_ANOTHER_ACCOUNT"));
            }
            Some(_) => {}
        }
        let Some(asset) = self.asset(&evidence.network, record.asset.as_str()) else {
            tracing::warn!(
                network = %evidence.network,
                asset = record.asset.as_str(),
                "deposit of an asset not in [deposit_assets]: left pending"
            );
            return Ok(Decided::Wait("asset not configured"));
        };
        let Some(pinned) = pinned else {
            return Ok(Decided::Wait("no evidence endpoints for the network"));
        };
        let claim = DepositClaim {
            tx_hash: evidence.tx_hash,
            log_index: evidence.log_index,
            recipient: evidence.recipient,
            asset,
            amount: record.amount.get(),
        };
        let verdict = match &pinned {
            Ok(pinned) => {
                let observed = pinned
                    .deposit(B256::from(evidence.tx_hash), evidence.log_index)
                    .await;
                judge_deposit(
                    &claim,
                    observed.as_ref().map_err(|e| *e),
                    pinned.final_block,
                )
            }
            Err(_) => return Ok(Decided::Wait("no agreement among the endpoints")),
        };
        Ok(match verdict {
            DepositVerdict::Confirmed { block } => {
                Decided::Attest(Some((block.number, block.hash)))
            }
            DepositVerdict::NotYet(_) => Decided::Wait("not found at final depth (yet)"),
            DepositVerdict::Contradicted(refusal) => Decided::Refuse(refusal.reason_code()),
        })
    }

    fn asset(&self, network: &str, code: &str) -> Option<Asset> {
        let assets = self.assets.get(network)?;
        if assets.native.as_deref() == Some(code) {
            return Some(Asset::Native);
        }
        assets
            .tokens
            .get(code)
            .and_then(|contract| token_address(contract))
            .map(Asset::Token)
    }

    async fn statements(&self, record: &CreditRecord) -> Result<Decided, WitnessError> {
        if record.statements.is_empty() {
            return Ok(Decided::Wait("no operator statement"));
        }
        let trust = match self.roots.trust(&self.store, record.tenant_id).await? {
            Ok(Some(trust)) => trust,
            Ok(None) => return Ok(Decided::Wait("no trust root or statement for the tenant")),
            Err(reason) => {
                tracing::error!(reason, "the tenant's stored trust statement is not trusted");
                return Ok(Decided::Wait("trust statement not trusted"));
            }
        };
        let facts = CreditFacts {
            tenant_id: record.tenant_id,
            credit_id: &record.credit_id,
            account: &record.account,
            asset: &record.asset,
            amount: record.amount,
        };
        let mut signed: Vec<CreditSignatureFacts<'_>> = record
            .statements
            .iter()
            .map(|s| CreditSignatureFacts {
                operator_key_id: &s.operator_key_id,
                policy_version: s.policy_version,
                signature: &s.signature,
            })
            .collect();
        if record.kind == CreditKind::Deposit {
            // Statement rows come from the operations API's login, the proposal from the inbox's:
            // a row that does not verify must not let one login kill another's deposit. It is
            // reported (a security signal) and left out; only verified operators count.
            signed.retain(|s| match check_credit_signature(&trust, &facts, s) {
                Ok(_) => true,
                Err(refusal) => {
                    tracing::error!(
                        reason = refusal.reason_code(),
                        "an operator statement of a pending deposit does not verify: left out"
                    );
                    false
                }
            });
            if signed.is_empty() {
                return Ok(Decided::Wait("no verified operator statement"));
            }
        }
        // An operator credit's statements come with its proposal, from the same login: one that
        // does not verify refuses the credit for good.
        Ok(match evaluate_credit(&trust, &facts, &signed) {
            Ok(CreditVerdict::Met { .. }) => Decided::Attest(None),
            Ok(CreditVerdict::Pending { .. }) => Decided::Wait("more operators must sign"),
            Err(refusal) => Decided::Refuse(refusal.reason_code()),
        })
    }
}

/// What the witness decided about one credit.
enum Decided {
    /// Attest (with the including block of a deposit with chain evidence).
    Attest(Option<(u64, [u8; 32])>),
    /// Nothing to decide now.
    Wait(&'static str),
    /// Refused for good, with this reason code.
    Refuse(&'static str),
}
