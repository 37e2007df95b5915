//! What a submission result means. One exhaustive match decides, with no wildcard arm: a new
//! class forces a decision. Only a node's explicit acceptance counts as BROADCAST; every ambiguous
//! class becomes UNKNOWN with the hold kept, and the reconciler decides from chain evidence.

/// The result of one `eth_sendRawTransaction`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmitClass {
    /// The node returned the transaction hash.
    Accepted,
    /// The node already has these exact bytes ("already known", "known transaction",
    /// anvil's "transaction already imported").
    AlreadyKnown,
    /// The nonce is consumed: by this transaction or another one. Ambiguous.
    NonceTooLow,
    /// A transaction with this nonce and a higher or equal fee is pending. Ambiguous.
    ReplacementUnderpriced,
    /// There is a gap before this nonce.
    NonceTooHigh,
    /// No answer in time: the node may have accepted it.
    Timeout,
    /// The connection failed or was reset: the request may have arrived.
    ConnectionFailed,
    /// An error this classifier does not know.
    Unclassified,
}

/// Where the operation goes after a submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// SIGNED -> BROADCAST.
    Broadcast,
    /// SIGNED -> UNKNOWN: the hold stays, nothing is re-signed, the reconciler decides.
    Unknown,
}

impl SubmitClass {
    /// Every class, in a fixed order (for counters and exhaustive reports).
    pub const ALL: [SubmitClass; 8] = [
        SubmitClass::Accepted,
        SubmitClass::AlreadyKnown,
        SubmitClass::NonceTooLow,
        SubmitClass::ReplacementUnderpriced,
        SubmitClass::NonceTooHigh,
        SubmitClass::Timeout,
        SubmitClass::ConnectionFailed,
        SubmitClass::Unclassified,
    ];

    /// Position in [`SubmitClass::ALL`].
    pub fn index(self) -> usize {
        match self {
            SubmitClass::Accepted => 0,
            SubmitClass::AlreadyKnown => 1,
            SubmitClass::NonceTooLow => 2,
            SubmitClass::ReplacementUnderpriced => 3,
            SubmitClass::NonceTooHigh => 4,
            SubmitClass::Timeout => 5,
            SubmitClass::ConnectionFailed => 6,
            SubmitClass::Unclassified => 7,
        }
    }

    /// Stable name for logs, metrics and the transition reason.
    pub fn as_str(self) -> &'static str {
        match self {
            SubmitClass::Accepted => "accepted",
            SubmitClass::AlreadyKnown => "already_known",
            SubmitClass::NonceTooLow => "nonce_too_low",
            SubmitClass::ReplacementUnderpriced => "replacement_underpriced",
            SubmitClass::NonceTooHigh => "nonce_too_high",
            SubmitClass::Timeout => "timeout",
            SubmitClass::ConnectionFailed => "connection_failed",
            SubmitClass::Unclassified => "unclassified",
        }
    }

    /// The verdict. Exhaustive on purpose.
    pub fn verdict(self) -> Verdict {
        match self {
            SubmitClass::Accepted | SubmitClass::AlreadyKnown => Verdict::Broadcast,
            SubmitClass::NonceTooLow
            | SubmitClass::ReplacementUnderpriced
            | SubmitClass::NonceTooHigh
            | SubmitClass::Timeout
            | SubmitClass::ConnectionFailed
            | SubmitClass::Unclassified => Verdict::Unknown,
        }
    }

    /// Classifies a JSON-RPC error message from a node (geth, erigon, reth, anvil, besu wording).
    pub fn from_rpc_message(message: &str) -> SubmitClass {
        let m = message.to_ascii_lowercase();
        if m.contains("already known")
            || m.contains("known transaction")
            || m.contains("already imported")
        {
            SubmitClass::AlreadyKnown
        } else if m.contains("nonce too low") || m.contains("nonce is too low") {
            SubmitClass::NonceTooLow
        } else if m.contains("replacement transaction underpriced")
            || m.contains("replacement underpriced")
        {
            SubmitClass::ReplacementUnderpriced
        } else if m.contains("nonce too high") || m.contains("nonce is too high") {
            SubmitClass::NonceTooHigh
        } else {
            SubmitClass::Unclassified
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_acceptance_is_broadcast_everything_ambiguous_is_unknown() {
        let all = [
            SubmitClass::Accepted,
            SubmitClass::AlreadyKnown,
            SubmitClass::NonceTooLow,
            SubmitClass::ReplacementUnderpriced,
            SubmitClass::NonceTooHigh,
            SubmitClass::Timeout,
            SubmitClass::ConnectionFailed,
            SubmitClass::Unclassified,
        ];
        let broadcast: Vec<_> = all
            .iter()
            .filter(|c| c.verdict() == Verdict::Broadcast)
            .collect();
        assert_eq!(
            broadcast,
            vec![&SubmitClass::Accepted, &SubmitClass::AlreadyKnown]
        );
    }

    #[test]
    fn node_messages_are_classified() {
        for (message, class) in [
            ("transaction already imported", SubmitClass::AlreadyKnown),
            ("already known", SubmitClass::AlreadyKnown),
            ("known transaction: 0xabc", SubmitClass::AlreadyKnown),
            ("nonce too low", SubmitClass::NonceTooLow),
            (
                "Nonce too low. Expected nonce to be 3 but got 2.",
                SubmitClass::NonceTooLow,
            ),
            (
                "replacement transaction underpriced",
                SubmitClass::ReplacementUnderpriced,
            ),
            ("nonce too high", SubmitClass::NonceTooHigh),
            (
                "insufficient funds for gas * price + value",
                SubmitClass::Unclassified,
            ),
            ("Failed to decode transaction", SubmitClass::Unclassified),
        ] {
            assert_eq!(SubmitClass::from_rpc_message(message), class, "{message}");
        }
    }
}
