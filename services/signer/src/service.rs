//! The `SignerService` gRPC edge: caller-token authentication, conversions, error statuses.

use crate::signing::{Signed, Signer, SignerError};
use opledger_grpc::status::{ErrorReason, error_status, invalid_field};
use opledger_grpc::store_status;
use opledger_proto::v1 as pb;
use opledger_proto::v1::signer_service_server::SignerService;
use opledger_store::signing::AttemptKind;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tonic::{Code, Request, Response, Status};

/// The handlers: a signer and the SHA-256 of each accepted caller token.
#[derive(Debug, Clone)]
pub struct SignerApi {
    signer: Signer,
    callers: Vec<[u8; 32]>,
}

impl SignerApi {
    /// Handlers accepting callers whose token hashes to one of `callers`.
    pub fn new(signer: Signer, callers: Vec<[u8; 32]>) -> SignerApi {
        SignerApi { signer, callers }
    }

    fn authorize<T>(&self, request: &Request<T>) -> Result<(), Status> {
        let token = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| {
                error_status(
                    Code::Unauthenticated,
                    ErrorReason::CredentialsMissing,
                    "missing caller token",
                    &[],
                )
            })?;
        let presented: [u8; 32] = Sha256::digest(token.trim().as_bytes()).into();
        // Compare against every configured hash without stopping early.
        let known = self
            .callers
            .iter()
            .fold(0_u8, |acc, h| acc | h.ct_eq(&presented).unwrap_u8());
        if known == 1 {
            Ok(())
        } else {
            Err(error_status(
                Code::Unauthenticated,
                ErrorReason::CredentialsInvalid,
                "invalid caller token",
                &[],
            ))
        }
    }
}

fn ids(
    tenant: &str,
    withdrawal: &str,
) -> Result<
    (
        opledger_domain::ids::TenantId,
        opledger_domain::ids::OperationId,
    ),
    Status,
> {
    let tenant = tenant
        .parse()
        .map_err(|_| invalid_field("tenant_id", "is not a tenant id"))?;
    let op = opledger_grpc::convert::operation_id("withdrawal_id", withdrawal)?;
    Ok((tenant, op))
}

fn response(signed: Signed) -> pb::SignResponse {
    let a = &signed.attempt;
    let kind = match a.signed.kind {
        AttemptKind::Original => pb::AttemptKind::Original,
        AttemptKind::FeeBump => pb::AttemptKind::FeeBump,
        AttemptKind::Cancel => pb::AttemptKind::Cancel,
    };
    pb::SignResponse {
        attempt: Some(pb::SignedAttempt {
            attempt: a.attempt,
            kind: kind as i32,
            raw_transaction: a.signed.raw_tx.clone(),
            tx_hash: a.signed.tx_hash.clone(),
            from_address: a.signed.sender.clone(),
            nonce: a.signed.nonce,
            chain_id: a.signed.chain_id,
            gas_limit: a.signed.gas_limit,
            max_fee_per_gas: a.signed.max_fee_per_gas.to_string(),
            max_priority_fee_per_gas: a.signed.max_priority_fee_per_gas.to_string(),
        }),
        already_signed: signed.already_signed,
    }
}

/// The one mapping of signer errors to statuses. Exhaustive: a new variant must be mapped.
pub fn signer_status(error: SignerError) -> Status {
    match error {
        SignerError::NotFound => error_status(
            Code::NotFound,
            ErrorReason::NotFound,
            "withdrawal not found",
            &[("resource", "withdrawal")],
        ),
        SignerError::HashMismatch => error_status(
            Code::FailedPrecondition,
            ErrorReason::PayloadHashMismatch,
            error.to_string(),
            &[],
        ),
        SignerError::NotSignable { state, retry } => error_status(
            if retry {
                Code::Aborted
            } else {
                Code::FailedPrecondition
            },
            ErrorReason::NotSignable,
            error.to_string(),
            &[("state", state.as_str())],
        ),
        SignerError::ApprovalsNotVerified(why) => error_status(
            Code::FailedPrecondition,
            ErrorReason::ApprovalsNotVerified,
            error.to_string(),
            &[("why", why.event_kind())],
        ),
        SignerError::FeeCapExceeded => error_status(
            Code::FailedPrecondition,
            ErrorReason::FeeCapExceeded,
            error.to_string(),
            &[],
        ),
        SignerError::NotConfigured(what) => error_status(
            Code::FailedPrecondition,
            ErrorReason::SignerNotConfigured,
            error.to_string(),
            &[("missing", what)],
        ),
        SignerError::Replacement(opledger_evm::tx::TxError::FeeCapExceeded { .. }) => error_status(
            Code::FailedPrecondition,
            ErrorReason::FeeCapExceeded,
            error.to_string(),
            &[],
        ),
        SignerError::Replacement(other) => error_status(
            Code::FailedPrecondition,
            ErrorReason::NotSignable,
            format!("replacement refused: {other}"),
            &[],
        ),
        SignerError::Sign(e) => {
            tracing::error!(error = %e, "signing failed");
            error_status(
                Code::Internal,
                ErrorReason::InternalError,
                "signing failed",
                &[],
            )
        }
        SignerError::Store(e) => store_status(e),
        SignerError::Interrupted => error_status(
            Code::Unavailable,
            ErrorReason::StoreUnavailable,
            error.to_string(),
            &[],
        ),
    }
}

#[tonic::async_trait]
impl SignerService for SignerApi {
    async fn sign_withdrawal(
        &self,
        request: Request<pb::SignWithdrawalRequest>,
    ) -> Result<Response<pb::SignResponse>, Status> {
        self.authorize(&request)?;
        let body = request.get_ref();
        let (tenant, op) = ids(&body.tenant_id, &body.withdrawal_id)?;
        let signed = self
            .signer
            .sign_withdrawal(tenant, op)
            .await
            .map_err(signer_status)?;
        Ok(Response::new(response(signed)))
    }

    async fn sign_replacement(
        &self,
        request: Request<pb::SignReplacementRequest>,
    ) -> Result<Response<pb::SignResponse>, Status> {
        self.authorize(&request)?;
        let body = request.get_ref();
        let (tenant, op) = ids(&body.tenant_id, &body.withdrawal_id)?;
        let kind = match pb::AttemptKind::try_from(body.kind) {
            Ok(pb::AttemptKind::FeeBump) => AttemptKind::FeeBump,
            Ok(pb::AttemptKind::Cancel) => AttemptKind::Cancel,
            Ok(pb::AttemptKind::Original | pb::AttemptKind::Unspecified) | Err(_) => {
                return Err(invalid_field(
                    "kind",
                    "must be ATTEMPT_KIND_FEE_BUMP or ATTEMPT_KIND_CANCEL",
                ));
            }
        };
        let signed = self
            .signer
            .sign_replacement(tenant, op, kind)
            .await
            .map_err(signer_status)?;
        Ok(Response::new(response(signed)))
    }
}
