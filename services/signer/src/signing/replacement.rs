//! Fee bumps and cancels: the guard on the operation's state and age, the stored attempts checked
//! by content, and the replacement signed by the original's sender and persisted.

use super::error::{Refusal, SignerError};
use super::signer::{Signed, Signer};
use crate::batch::new_attempt;
use crate::config::NetworkConfig;
use alloy_primitives::Address;
use opledger_domain::evidence::{
    self, AttemptDefect, AttemptKind, ExpectedTransfer, ReplacementRequest,
};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::WithdrawalPayload;
use opledger_domain::state::{Actor, OperationState};
use opledger_evm::signer::{self as evm, SignError};
use opledger_evm::tx::{self, TransferRequest, TxError};
use opledger_store::signing::{
    Attempt, GuardRefusal, NewAttempt, ReplacementError, ReplacementGuard,
};
use std::time::Duration;

impl Signer {
    /// Persists and returns a fee bump or cancel replacing the latest attempt (same nonce). A fee
    /// bump needs a BROADCAST operation whose latest attempt is older than
    /// `fee_bump_min_age_secs`, a cancel an UNKNOWN one older than `cancel_min_age_secs`; both are
    /// checked under the operation's row lock, and a refusal is recorded against `caller`.
    ///
    /// What is signed comes from the stored attempts, checked by content: the original must be the
    /// approved transfer, the latest must be what its stored kind says, the replacement is signed
    /// by the original's sender (a retiring wallet included) and a fee bump of a cancel is a
    /// cancel.
    pub async fn sign_replacement(
        &self,
        tenant: TenantId,
        op: OperationId,
        kind: AttemptKind,
        caller: &str,
    ) -> Result<Signed, SignerError> {
        let input = self
            .store
            .signing_input(tenant, op)
            .await?
            .ok_or(SignerError::NotFound)?;
        self.verify(tenant, op, &input).await?;
        let payload = &input.operation.payload;
        let network = self
            .config
            .networks
            .get(payload.network.as_str())
            .ok_or(SignerError::NotConfigured("network"))?;
        let fee_cap = payload.fee_cap.get();
        let requested = match kind {
            AttemptKind::FeeBump => ReplacementRequest::FeeBump,
            AttemptKind::Cancel | AttemptKind::Original => ReplacementRequest::Cancel,
        };
        let guard = self.replacement_guard(requested);
        let persisted = self
            .store
            .persist_replacement(tenant, op, &guard, |attempts| {
                self.replacement(tenant, payload, network, fee_cap, requested, attempts)
            })
            .await?;
        let attempt = match persisted {
            Ok(attempt) => attempt,
            Err(ReplacementError::Refused(refused)) => {
                let refusal = match refused {
                    GuardRefusal::State(state) => Refusal::State(state),
                    GuardRefusal::TooRecent { age, min_age } => Refusal::Age {
                        age_secs: age.as_secs(),
                        min_age_secs: min_age.as_secs(),
                    },
                };
                return Err(self.refuse(tenant, op, caller, refusal).await);
            }
            Err(ReplacementError::Sign(SignerError::AttemptMismatch(defect))) => {
                self.store
                    .record_security_event(
                        tenant,
                        op,
                        "SIGNER_ATTEMPT_MISMATCH",
                        Actor::Signer,
                        &self.config.instance_id,
                        "a stored attempt does not match its content or the approved payload",
                    )
                    .await?;
                tracing::error!(%op, "refused to sign a replacement: a stored attempt does not match its content");
                return Err(SignerError::AttemptMismatch(defect));
            }
            Err(ReplacementError::Sign(e)) => return Err(e),
        };
        tracing::info!(%op, caller, attempt = attempt.attempt, kind = attempt.signed.kind.as_str(), released = attempt.released, "replacement signed and persisted");
        Ok(Signed {
            attempt,
            already_signed: false,
        })
    }

    /// What the operation must be for `requested`, checked under its row lock: BROADCAST with a
    /// latest attempt older than `fee_bump_min_age_secs` for a fee bump, UNKNOWN with one older
    /// than `cancel_min_age_secs` for a cancel.
    fn replacement_guard(&self, requested: ReplacementRequest) -> ReplacementGuard<'static> {
        let (states, min_age_secs): (&[OperationState], u64) = match requested {
            ReplacementRequest::FeeBump => (
                &[OperationState::Broadcast],
                self.config.fee_bump_min_age_secs,
            ),
            ReplacementRequest::Cancel => {
                (&[OperationState::Unknown], self.config.cancel_min_age_secs)
            }
        };
        ReplacementGuard {
            states,
            min_age: Duration::from_secs(min_age_secs),
        }
    }

    /// The replacement of the latest of `attempts` (oldest first), signed: see
    /// [`Signer::sign_replacement`].
    fn replacement(
        &self,
        tenant: TenantId,
        payload: &WithdrawalPayload,
        network: &NetworkConfig,
        fee_cap: u128,
        requested: ReplacementRequest,
        attempts: &[Attempt],
    ) -> Result<NewAttempt, SignerError> {
        let (Some(original), Some(latest)) = (attempts.first(), attempts.last()) else {
            return Err(SignerError::Sign(SignError::Unsupported(
                "no attempt to replace",
            )));
        };
        let decoded_original = evm::decode(&original.signed.raw_tx)?;
        let expected = self.expected_transfer(payload, network, &decoded_original.content())?;
        let decoded_latest = evm::decode(&latest.signed.raw_tx)?;
        let role = evidence::role_of(&decoded_latest.content(), &expected)
            .map_err(AttemptDefect::from)
            .and_then(|role| latest.signed.kind.check(role).map_err(AttemptDefect::from))?;
        // The original's sender (recovered from its signature, not read from its row) signs,
        // whichever wallet is the tenant's current one: the domain's rule, which the model checks.
        let network_id = payload.network.as_str();
        let sender = evidence::replacement_sender(
            decoded_original.from.into_array(),
            &self.wallets.senders(tenant, network_id),
        )
        .map_err(|_| SignerError::NoKeyForSender)?;
        let wallet = self
            .wallets
            .by_sender(tenant, network_id, &format!("{:#x}", Address::from(sender)))
            .ok_or(SignerError::NoKeyForSender)?;
        let previous = decoded_latest
            .transfer_request()
            .ok_or(SignError::Unsupported("stored attempt is not a transfer"))?;
        let kind = evidence::replacement_kind(requested, role);
        let request = match (kind, role) {
            (AttemptKind::FeeBump, _) => tx::bump(&previous, network.fee_bump_percent, fee_cap)
                .map_err(SignerError::Replacement)?,
            // A cancel of a transfer, or a fee bump of a cancel: a self-transfer of 0 with higher
            // fees, within the cancel budget.
            (AttemptKind::Cancel | AttemptKind::Original, _) => {
                cancel_request(&previous, network, wallet.key.address()).map_err(|e| match e {
                    SignError::Request(refused) => SignerError::Replacement(refused),
                    other => SignerError::Sign(other),
                })?
            }
        };
        let signed = evm::sign(&request, wallet.key.as_ref())?;
        // What was signed must be what it will be stored as.
        let signed_role = evidence::role_of(&evm::decode(&signed.raw)?.content(), &expected)
            .map_err(AttemptDefect::from)?;
        kind.check(signed_role).map_err(AttemptDefect::from)?;
        let kind = match kind {
            AttemptKind::FeeBump => AttemptKind::FeeBump,
            AttemptKind::Cancel | AttemptKind::Original => AttemptKind::Cancel,
        };
        Ok(new_attempt(kind, request.chain_id, &signed))
    }

    /// The transfer the approved payload must be executed as, by this signer's network
    /// configuration, from the original attempt's sender at its nonce.
    fn expected_transfer(
        &self,
        payload: &WithdrawalPayload,
        network: &NetworkConfig,
        original: &evidence::TxContent,
    ) -> Result<ExpectedTransfer, SignerError> {
        let recipient = evidence::parse_address(payload.destination.as_str())
            .ok_or(SignerError::NotConfigured("destination format"))?;
        let asset = if payload.asset.as_str() == network.native_asset {
            evidence::Asset::Native
        } else {
            let token = network
                .tokens
                .get(payload.asset.as_str())
                .and_then(|t| evidence::parse_address(t))
                .ok_or(SignerError::NotConfigured("asset"))?;
            evidence::Asset::Token(token)
        };
        Ok(ExpectedTransfer {
            chain_id: network.chain_id,
            sender: original.sender,
            nonce: original.nonce,
            recipient,
            asset,
            amount: payload.amount.get(),
        })
    }
}

/// A cancel at the previous attempt's nonce, paying at least 10% more than it (nodes refuse a
/// cheaper replacement), within the network's cancel budget.
fn cancel_request(
    previous: &TransferRequest,
    network: &NetworkConfig,
    from: Address,
) -> Result<TransferRequest, SignError> {
    let budget = network.cancel_max_fee_per_gas.0;
    let raise = |fee: u128| fee.saturating_add(fee.div_ceil(10));
    let max_fee = raise(previous.max_fee_per_gas);
    if max_fee > budget {
        let gas = u128::from(network.gas_limit_native);
        return Err(SignError::from(TxError::FeeCapExceeded {
            required: gas.saturating_mul(max_fee),
            fee_cap: gas.saturating_mul(budget),
        }));
    }
    Ok(tx::cancel(
        previous.chain_id,
        previous.nonce,
        from,
        network.gas_limit_native,
        max_fee,
        raise(previous.max_priority_fee_per_gas).min(max_fee),
    ))
}
