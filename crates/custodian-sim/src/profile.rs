//! The three provider profiles the double plays, and the kinds of calls a fault can target.

use serde::{Deserialize, Serialize};

/// A provider profile served by the double.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// `lookup_by_reference`: Fireblocks v1.
    Fireblocks,
    /// `one_send_per_reference`: BitGo `sendcoins` with `sequenceId`.
    Bitgo,
    /// `no_lookup`: Coinbase Prime withdrawals and the transaction list.
    Prime,
}

impl Profile {
    /// The name used in logs, fault labels and the `/sim/*` answers.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Fireblocks => "fireblocks",
            Profile::Bitgo => "bitgo",
            Profile::Prime => "prime",
        }
    }
}

/// Which kind of provider call a request is (fault rules may target one kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    /// A create call (Fireblocks create, BitGo sendcoins, Prime withdrawal).
    #[default]
    Create,
    /// A read (Fireblocks and BitGo lookups, the Prime transaction list).
    Lookup,
    /// Both (only meaningful in a rule's `on`).
    Any,
}

impl Endpoint {
    /// Whether a rule targeting `self` applies to a call of kind `call`.
    pub fn covers(self, call: Endpoint) -> bool {
        self == Endpoint::Any || self == call
    }
}
