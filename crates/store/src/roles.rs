//! One narrow handle per database role.
//!
//! Each service reaches the database through the handle of its own login and nothing else: the
//! handle exposes exactly the calls that service makes (within what its login's grants allow), so
//! a call of another role's is not there to make, and naming another role's handle or the whole
//! [`Store`] in a service is refused by `tests/store/handles.rs`. [`Store`] itself, with every
//! call, is the administrator's handle (the migration owner's login: `opledger-admin`), the
//! benchmarks' and the tests'.
//!
//! The implementations live in the modules by subject ([`crate::signing`], [`crate::broadcast`],
//! [`crate::witness`], [`crate::inbox`], ...); a handle forwards to them.

use crate::Store;

/// The calls more than one role makes, each written once: `shared_calls!(Handle: name, ...)`
/// forwards those names on that handle.
macro_rules! shared_calls {
    ($handle:ident: $($name:ident),+ $(,)?) => {
        $(shared_calls!($handle, $name);)+
    };
    ($handle:ident, attempts) => {
        impl $handle {
            /// See [`Store::attempts`].
            pub async fn attempts(
                &self,
                tenant_id: opledger_domain::ids::TenantId,
                op_id: opledger_domain::ids::OperationId,
            ) -> crate::Result<Vec<crate::signing::Attempt>> {
                self.store.attempts(tenant_id, op_id).await
            }
        }
    };
    ($handle:ident, confirm) => {
        impl $handle {
            /// See [`Store::confirm`].
            pub async fn confirm(
                &self,
                request: &crate::transition::TransitionRequest<'_>,
                inclusion: &crate::broadcast::Inclusion,
            ) -> crate::Result<()> {
                self.store.confirm(request, inclusion).await
            }
        }
    };
    ($handle:ident, bound_elsewhere) => {
        impl $handle {
            /// See [`Store::bound_elsewhere`].
            pub async fn bound_elsewhere(
                &self,
                tenant_id: opledger_domain::ids::TenantId,
                op_id: opledger_domain::ids::OperationId,
                provider_ids: &[String],
            ) -> crate::Result<Vec<String>> {
                self.store
                    .bound_elsewhere(tenant_id, op_id, provider_ids)
                    .await
            }
        }
    };
    ($handle:ident, credit) => {
        impl $handle {
            /// See [`Store::credit`].
            pub async fn credit(
                &self,
                tenant_id: opledger_domain::ids::TenantId,
                credit_id: &[u8; 32],
            ) -> crate::Result<Option<crate::credits::CreditRecord>> {
                self.store.credit(tenant_id, credit_id).await
            }
        }
    };
    ($handle:ident, escalate) => {
        impl $handle {
            /// See [`Store::escalate`].
            pub async fn escalate(
                &self,
                request: &crate::transition::TransitionRequest<'_>,
                owner: &str,
                reason_code: &str,
            ) -> crate::Result<()> {
                self.store.escalate(request, owner, reason_code).await
            }
        }
    };
    ($handle:ident, pass_locks) => {
        impl $handle {
            /// See [`Store::pass_locks`].
            pub fn pass_locks(&self, max_connections: u32) -> crate::pass::PassLocks {
                self.store.pass_locks(max_connections)
            }
        }
    };
    ($handle:ident, record_security_event) => {
        impl $handle {
            /// See [`Store::record_security_event`].
            pub async fn record_security_event(
                &self,
                tenant_id: opledger_domain::ids::TenantId,
                op_id: opledger_domain::ids::OperationId,
                kind: &str,
                actor: opledger_domain::state::Actor,
                actor_id: &str,
                detail: &str,
            ) -> crate::Result<()> {
                self.store
                    .record_security_event(tenant_id, op_id, kind, actor, actor_id, detail)
                    .await
            }
        }
    };
    ($handle:ident, trace_context) => {
        impl $handle {
            /// See [`Store::trace_context`].
            pub async fn trace_context(
                &self,
                tenant_id: opledger_domain::ids::TenantId,
                op_id: opledger_domain::ids::OperationId,
            ) -> crate::Result<Option<String>> {
                self.store.trace_context(tenant_id, op_id).await
            }
        }
    };
    ($handle:ident, transition) => {
        impl $handle {
            /// See [`Store::transition`].
            pub async fn transition(
                &self,
                request: &crate::transition::TransitionRequest<'_>,
            ) -> crate::Result<crate::transition::Transitioned> {
                self.store.transition(request).await
            }
        }
    };
    ($handle:ident, trust_statement) => {
        impl $handle {
            /// See [`Store::trust_statement`].
            pub async fn trust_statement(
                &self,
                tenant_id: opledger_domain::ids::TenantId,
            ) -> crate::Result<Option<crate::trust::StoredTrust>> {
                self.store.trust_statement(tenant_id).await
            }
        }
    };
    ($handle:ident, withdrawal) => {
        impl $handle {
            /// See [`Store::withdrawal`].
            pub async fn withdrawal(
                &self,
                tenant_id: opledger_domain::ids::TenantId,
                op_id: opledger_domain::ids::OperationId,
            ) -> crate::Result<opledger_domain::operation::Operation> {
                self.store.withdrawal(tenant_id, op_id).await
            }
        }
    };
}
use shared_calls;

mod approvals;
mod broadcaster;
mod custodian;
mod inbox;
mod operations;
mod reconciler;
mod signer;
mod witness;

pub use approvals::ApprovalsStore;
pub use broadcaster::BroadcasterStore;
pub use custodian::CustodianStore;
pub use inbox::InboxStore;
pub use operations::OperationsStore;
pub use reconciler::ReconcilerStore;
pub use signer::SignerStore;
pub use witness::WitnessStore;

/// The one lookup every gRPC service makes for its callers: an API key by id (the
/// authenticator's).
#[derive(Debug, Clone)]
pub struct KeysStore {
    store: Store,
}

impl KeysStore {
    /// See [`Store::active_key`].
    pub async fn active_key(&self, key_id: &str) -> crate::Result<Option<crate::keys::KeyRecord>> {
        self.store.active_key(key_id).await
    }
}

impl From<Store> for KeysStore {
    fn from(store: Store) -> KeysStore {
        KeysStore { store }
    }
}

/// Declares a role's handle: the type, `Store::<accessor>()`, `From<Store>` and `keys()`.
macro_rules! role_handle {
    ($(#[$doc:meta])* $name:ident, $accessor:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name {
            store: Store,
        }

        impl Store {
            #[doc = concat!(
                "This store as the [`", stringify!($name), "`] handle (clones the pool's handle)."
            )]
            pub fn $accessor(&self) -> $name {
                $name { store: self.clone() }
            }
        }

        impl From<Store> for $name {
            fn from(store: Store) -> $name {
                $name { store }
            }
        }

        impl From<$name> for super::KeysStore {
            fn from(handle: $name) -> super::KeysStore {
                super::KeysStore::from(handle.store)
            }
        }

        impl $name {
            /// The API-key lookups of this service's authenticator.
            pub fn keys(&self) -> super::KeysStore {
                super::KeysStore::from(self.store.clone())
            }

            /// A readiness probe of this service's database (whether it takes writes), each
            /// check given at most `timeout`.
            pub fn probe(&self, timeout: std::time::Duration) -> crate::probe::DatabaseProbe {
                crate::probe::DatabaseProbe::new(&self.store, timeout)
            }
        }
    };
}
use role_handle;
