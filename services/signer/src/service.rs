//! The `SignerService` gRPC edge: caller authentication (token, and the bound client certificate
//! when configured), each caller's capabilities, conversions, error statuses.

use crate::config::{Capability, Config, digest};
use crate::signing::{Refusal, Signed, Signer, SignerError, unverified_kind};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_grpc::status::{ErrorReason, error_status, invalid_field};
use opledger_grpc::store_status;
use opledger_proto::v1 as pb;
use opledger_proto::v1::signer_service_server::SignerService;
use opledger_store::signing::AttemptKind;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tonic::{Code, Request, Response, Status};

/// One accepted caller as the service checks it: its name, token digest, capabilities and, when
/// bound, its client certificate's digest.
#[derive(Debug, Clone)]
pub struct Caller {
    /// Names it in logs and security events.
    pub name: String,
    /// SHA-256 of its token.
    pub token_sha256: [u8; 32],
    /// What it may ask for.
    pub capabilities: Vec<Capability>,
    /// SHA-256 of the DER client certificate it must present, when bound.
    pub client_cert_sha256: Option<[u8; 32]>,
}

/// The callers of a (validated) configuration.
pub fn callers(config: &Config) -> Vec<Caller> {
    config
        .callers
        .iter()
        .filter_map(|c| {
            Some(Caller {
                name: c.name.clone(),
                token_sha256: digest(&c.token_sha256)?,
                capabilities: c.capabilities.clone(),
                client_cert_sha256: match c.client_cert_sha256.as_deref() {
                    Some(h) => Some(digest(h)?),
                    None => None,
                },
            })
        })
        .collect()
}

/// The handlers: a signer and its accepted callers.
#[derive(Debug, Clone)]
pub struct SignerApi {
    signer: Signer,
    callers: Vec<Caller>,
}

impl SignerApi {
    /// Handlers accepting `callers`, each for its own capabilities.
    pub fn new(signer: Signer, callers: Vec<Caller>) -> SignerApi {
        SignerApi { signer, callers }
    }

    /// The caller whose token the request carries; an unknown or missing token is
    /// UNAUTHENTICATED. The token itself is never logged.
    fn authenticate<T>(&self, request: &Request<T>) -> Result<&Caller, Status> {
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
        let mut found = None;
        for (i, caller) in self.callers.iter().enumerate() {
            if bool::from(caller.token_sha256.ct_eq(&presented)) {
                found = Some(i);
            }
        }
        found.map(|i| &self.callers[i]).ok_or_else(|| {
            error_status(
                Code::Unauthenticated,
                ErrorReason::CredentialsInvalid,
                "invalid caller token",
                &[],
            )
        })
    }

    /// Admits `caller` to ask for `capability` on the operation: its bound client certificate
    /// (when configured) must be the one the TLS session presented, and it must hold the
    /// capability. A refusal is a security event and PERMISSION_DENIED.
    async fn permit<T>(
        &self,
        request: &Request<T>,
        caller: &Caller,
        capability: Capability,
        tenant: TenantId,
        op: OperationId,
    ) -> Result<(), Status> {
        let refusal = if let Some(bound) = &caller.client_cert_sha256 {
            let presented = request
                .peer_certs()
                .and_then(|certs| certs.first().map(|c| Sha256::digest(c.as_ref())));
            match presented {
                Some(d) if bool::from(d.as_slice().ct_eq(bound.as_slice())) => None,
                _ => Some(Refusal::ClientCertificate),
            }
        } else {
            None
        };
        let refusal = refusal.or_else(|| {
            (!caller.capabilities.contains(&capability)).then_some(Refusal::Capability(capability))
        });
        match refusal {
            None => Ok(()),
            Some(refusal) => Err(signer_status(
                self.signer.refuse(tenant, op, &caller.name, refusal).await,
            )),
        }
    }
}

fn ids(tenant: &str, withdrawal: &str) -> Result<(TenantId, OperationId), Status> {
    let tenant = tenant
        .parse()
        .map_err(|_| invalid_field("tenant_id", "is not a tenant id"))?;
    let op = opledger_grpc::convert::operation_id("withdrawal_id", withdrawal)?;
    Ok((tenant, op))
}

/// The answer: the attempt's id, hash, nonce and fees always; its bytes only once the signed-bytes
/// gate released it (a held-back attempt's bytes never leave the signer; ask again after release).
fn response(signed: Signed) -> pb::SignResponse {
    let a = &signed.attempt;
    let raw_transaction = if a.released {
        a.signed.raw_tx.clone()
    } else {
        Vec::new()
    };
    let kind = match a.signed.kind {
        AttemptKind::Original => pb::AttemptKind::Original,
        AttemptKind::FeeBump => pb::AttemptKind::FeeBump,
        AttemptKind::Cancel => pb::AttemptKind::Cancel,
    };
    pb::SignResponse {
        attempt: Some(pb::SignedAttempt {
            attempt: a.attempt,
            kind: kind as i32,
            raw_transaction,
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
        SignerError::HashMismatch => {
            precondition(ErrorReason::PayloadHashMismatch, error.to_string(), &[])
        }
        SignerError::CustodianExecuted => precondition(
            ErrorReason::NotSignable,
            error.to_string(),
            &[("executor", "custodian")],
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
        SignerError::ApprovalsNotVerified(why) => precondition(
            ErrorReason::ApprovalsNotVerified,
            error.to_string(),
            &[("why", unverified_kind(why))],
        ),
        SignerError::FeeCapExceeded => {
            precondition(ErrorReason::FeeCapExceeded, error.to_string(), &[])
        }
        SignerError::NotConfigured(what) => precondition(
            ErrorReason::SignerNotConfigured,
            error.to_string(),
            &[("missing", what)],
        ),
        SignerError::Replacement(opledger_evm::tx::TxError::FeeCapExceeded { .. }) => {
            precondition(ErrorReason::FeeCapExceeded, error.to_string(), &[])
        }
        SignerError::Replacement(other) => precondition(
            ErrorReason::NotSignable,
            format!("replacement refused: {other}"),
            &[],
        ),
        SignerError::Sign(e) => sign_failed_status(&e),
        SignerError::Store(e) => store_status(e),
        SignerError::NotAllowed(refusal) => not_allowed_status(refusal, error.to_string()),
        SignerError::Interrupted => error_status(
            Code::Unavailable,
            ErrorReason::StoreUnavailable,
            error.to_string(),
            &[],
        ),
        SignerError::MemoNotExecutable => precondition(
            ErrorReason::MemoNotExecutable,
            error.to_string(),
            &[("field", "payload.memo")],
        ),
        SignerError::AttemptMismatch(_) => {
            precondition(ErrorReason::AttemptMismatch, error.to_string(), &[])
        }
        SignerError::NoKeyForSender => {
            precondition(ErrorReason::NoKeyForSender, error.to_string(), &[])
        }
    }
}

/// FAILED_PRECONDITION with `reason`, `message` and `metadata`.
fn precondition(
    reason: ErrorReason,
    message: impl Into<String>,
    metadata: &[(&str, &str)],
) -> Status {
    error_status(Code::FailedPrecondition, reason, message, metadata)
}

/// A signing failure: logged with its cause, answered INTERNAL without it.
fn sign_failed_status(e: &opledger_evm::signer::SignError) -> Status {
    tracing::error!(error = %e, "signing failed");
    error_status(
        Code::Internal,
        ErrorReason::InternalError,
        "signing failed",
        &[],
    )
}

/// A caller refused `refusal`: PERMISSION_DENIED naming what was missing, with `message`.
fn not_allowed_status(refusal: Refusal, message: String) -> Status {
    let detail = match refusal {
        Refusal::Capability(c) => c.as_str().to_owned(),
        Refusal::ClientCertificate => "client_certificate".to_owned(),
        Refusal::State(state) => state.as_str().to_owned(),
        Refusal::Age { min_age_secs, .. } => format!("{min_age_secs}s"),
    };
    let key = match refusal {
        Refusal::Capability(_) => "capability",
        Refusal::ClientCertificate => "credential",
        Refusal::State(_) => "state",
        Refusal::Age { .. } => "min_age",
    };
    error_status(
        Code::PermissionDenied,
        ErrorReason::CallerNotAllowed,
        message,
        &[("missing", refusal.missing()), (key, detail.as_str())],
    )
}

#[tonic::async_trait]
impl SignerService for SignerApi {
    async fn sign_withdrawal(
        &self,
        request: Request<pb::SignWithdrawalRequest>,
    ) -> Result<Response<pb::SignResponse>, Status> {
        let caller = self.authenticate(&request)?;
        let body = request.get_ref();
        let (tenant, op) = ids(&body.tenant_id, &body.withdrawal_id)?;
        tracing::info!(%op, caller = %caller.name, "sign withdrawal requested");
        self.permit(&request, caller, Capability::SignWithdrawal, tenant, op)
            .await?;
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
        let caller = self.authenticate(&request)?;
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
        tracing::info!(%op, caller = %caller.name, kind = kind.as_str(), "replacement requested");
        let capability = match kind {
            AttemptKind::FeeBump => Capability::FeeBump,
            AttemptKind::Cancel | AttemptKind::Original => Capability::Cancel,
        };
        self.permit(&request, caller, capability, tenant, op)
            .await?;
        let signed = self
            .signer
            .sign_replacement(tenant, op, kind, &caller.name)
            .await
            .map_err(signer_status)?;
        Ok(Response::new(response(signed)))
    }
}
