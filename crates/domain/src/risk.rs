//! Risk signals raised on a withdrawal when it is created, and the set of them an approver
//! acknowledges inside a signed approval statement.

use std::fmt;

/// A risk signal raised on a withdrawal at creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RiskFlag {
    /// The tenant sent the same amount of the same asset to the same destination recently under a
    /// different idempotency key.
    SameDestinationAndAmount,
}

impl RiskFlag {
    /// Every flag, in canonical order (ascending by name).
    pub const ALL: [RiskFlag; 1] = [RiskFlag::SameDestinationAndAmount];

    /// The stored and encoded name.
    pub fn as_str(self) -> &'static str {
        match self {
            RiskFlag::SameDestinationAndAmount => "SAME_DESTINATION_AND_AMOUNT",
        }
    }

    /// Parses a stored or encoded name; `None` for a name this version does not know.
    pub fn parse(text: &str) -> Option<RiskFlag> {
        RiskFlag::ALL.into_iter().find(|f| f.as_str() == text)
    }

    fn bit(self) -> u32 {
        match self {
            RiskFlag::SameDestinationAndAmount => 1,
        }
    }
}

impl fmt::Display for RiskFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of risk flags (each at most once), iterated in canonical order.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RiskFlags(u32);

impl RiskFlags {
    /// No flag.
    pub const EMPTY: RiskFlags = RiskFlags(0);

    /// True when the set has no flag.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// True when `flag` is in the set.
    pub fn contains(self, flag: RiskFlag) -> bool {
        self.0 & flag.bit() != 0
    }

    /// True when every flag of `other` is in this set.
    pub fn covers(self, other: RiskFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// The set with `flag` added.
    pub fn with(self, flag: RiskFlag) -> RiskFlags {
        RiskFlags(self.0 | flag.bit())
    }

    /// The flags of `other` not in this set.
    pub fn missing_from(self, other: RiskFlags) -> RiskFlags {
        RiskFlags(other.0 & !self.0)
    }

    /// The flags, in canonical order.
    pub fn iter(self) -> impl Iterator<Item = RiskFlag> {
        RiskFlag::ALL.into_iter().filter(move |f| self.contains(*f))
    }
}

impl FromIterator<RiskFlag> for RiskFlags {
    fn from_iter<I: IntoIterator<Item = RiskFlag>>(flags: I) -> RiskFlags {
        flags.into_iter().fold(RiskFlags::EMPTY, RiskFlags::with)
    }
}

impl fmt::Debug for RiskFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_in_canonical_order() {
        for flag in RiskFlag::ALL {
            assert_eq!(RiskFlag::parse(flag.as_str()), Some(flag));
        }
        assert!(
            RiskFlag::ALL
                .windows(2)
                .all(|w| w[0].as_str() < w[1].as_str())
        );
        assert_eq!(RiskFlag::parse("same_destination_and_amount"), None);
        assert_eq!(RiskFlag::parse(""), None);
    }

    #[test]
    fn a_set_covers_exactly_its_flags() {
        let one: RiskFlags = [RiskFlag::SameDestinationAndAmount].into_iter().collect();
        assert!(one.contains(RiskFlag::SameDestinationAndAmount));
        assert!(one.covers(RiskFlags::EMPTY));
        assert!(one.covers(one));
        assert!(!RiskFlags::EMPTY.covers(one));
        assert_eq!(RiskFlags::EMPTY.missing_from(one), one);
        assert!(one.missing_from(one).is_empty());
        assert_eq!(one.iter().collect::<Vec<_>>(), RiskFlag::ALL.to_vec());
        // Adding twice is adding once.
        assert_eq!(one.with(RiskFlag::SameDestinationAndAmount), one);
    }
}
