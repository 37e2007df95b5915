//! What the signer reads and writes: the signing input, claims, attempts and nonces.
//!
//! The signer claims an APPROVED operation (APPROVED -> SIGNING with a lease, committed), verifies
//! the payload hash, then in ONE transaction allocates the sender's next nonce, persists the signed
//! attempt and moves the operation to SIGNED. A crash before that commit leaves no attempt and no
//! advanced nonce; the expired lease is reclaimed (SIGNING -> APPROVED) only while no attempt
//! exists, and signing the same transaction with the same nonce again yields the same bytes.
//!
//! Its parts: `input` (what the signer verifies: the operation, its decisions, signed screenings
//! and trust statement; the trust versions it accepted; security events), `claims` (claiming and
//! giving back), `attempts` (attempts as stored and read), `persist` (persisting originals and
//! replacements) and `release` (the signed-bytes gate). The nonce allocation itself, one of the
//! serialization points of docs/serialization.md, is here.

mod attempts;
mod claims;
mod input;
mod persist;
mod release;

pub use attempts::{Attempt, AttemptKind, NewAttempt};
pub use claims::{Sender, SignClaim};
pub use input::SigningInput;
pub use persist::{GuardRefusal, ReplacementError, ReplacementGuard};

use crate::{Result, StoreError};
use sqlx::PgConnection;

/// Takes `count` consecutive nonces of the sender and returns the first. One statement locks (or
/// creates, at `initial_nonce`) the sender's row and advances it: the lock is held until the
/// caller's commit, so the counter commits only together with the attempts that use its nonces.
async fn take_nonces(conn: &mut PgConnection, sender: &Sender<'_>, count: u64) -> Result<u64> {
    let as_i64 = |v: u64| i64::try_from(v).map_err(|_| StoreError::Corrupt { what: "nonce" });
    let (first,): (i64,) = sqlx::query_as(
        "INSERT INTO signer_nonces (network, sender, next_nonce) VALUES ($1, $2, $3 + $4) \
         ON CONFLICT (network, sender) DO UPDATE SET next_nonce = signer_nonces.next_nonce + $4 \
         RETURNING next_nonce - $4",
    )
    .bind(sender.network)
    .bind(sender.address)
    .bind(as_i64(sender.initial_nonce)?)
    .bind(as_i64(count)?)
    .fetch_one(&mut *conn)
    .await?;
    u64::try_from(first).map_err(|_| StoreError::Corrupt { what: "nonce" })
}
