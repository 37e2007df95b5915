//! The operation's nonce and the tenant's hot wallets: the names the chain and the store share,
//! kept in a leaf so that neither needs the other for them.

/// The operation's nonce (both wallets' transactions use it).
pub const NONCE: u64 = 7;

/// A hot wallet of the tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Wallet {
    /// The wallet that signed the original attempt.
    A,
    /// The wallet the tenant may rotate to.
    B,
}
