//! Approval policy: how many distinct approvers a withdrawal needs, by amount.

use crate::amount::Amount;

/// The most approvers a rule may require.
pub const MAX_REQUIRED_APPROVALS: u32 = 10;

/// Withdrawals of at least `min_amount` need `required_approvals` distinct approvers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApprovalRule {
    /// Lower bound (inclusive) of the amounts this rule covers.
    pub min_amount: Amount,
    /// Distinct approvers needed, 1 to [`MAX_REQUIRED_APPROVALS`].
    pub required_approvals: u32,
}

/// A tenant's rules for one asset, sorted by `min_amount`, always with a base rule at zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalPolicy {
    rules: Vec<ApprovalRule>,
}

/// Why a set of rules is not a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// No rule starts at amount zero, so some amounts would need no approval at all.
    #[error("approval policy needs a rule with min_amount 0")]
    NoBaseRule,
    /// Two rules have the same `min_amount`.
    #[error("approval policy has two rules with the same min_amount")]
    DuplicateMinAmount,
    /// A rule requires zero or more than the maximum approvers.
    #[error("required_approvals must be between 1 and 10")]
    RequiredOutOfRange,
}

impl Default for ApprovalPolicy {
    /// One approver for every amount.
    fn default() -> Self {
        ApprovalPolicy {
            rules: vec![ApprovalRule {
                min_amount: Amount::ZERO,
                required_approvals: 1,
            }],
        }
    }
}

impl ApprovalPolicy {
    /// Validates and sorts `rules`.
    pub fn new(mut rules: Vec<ApprovalRule>) -> Result<ApprovalPolicy, PolicyError> {
        if rules
            .iter()
            .any(|r| r.required_approvals == 0 || r.required_approvals > MAX_REQUIRED_APPROVALS)
        {
            return Err(PolicyError::RequiredOutOfRange);
        }
        rules.sort_by_key(|r| r.min_amount);
        if rules.windows(2).any(|w| w[0].min_amount == w[1].min_amount) {
            return Err(PolicyError::DuplicateMinAmount);
        }
        if rules.first().is_none_or(|r| !r.min_amount.is_zero()) {
            return Err(PolicyError::NoBaseRule);
        }
        Ok(ApprovalPolicy { rules })
    }

    /// The rules, sorted by `min_amount`.
    pub fn rules(&self) -> &[ApprovalRule] {
        &self.rules
    }

    /// Approvers needed for `amount`: the rule with the highest `min_amount` not above it.
    pub fn required_for(&self, amount: Amount) -> u32 {
        self.rules
            .iter()
            .rev()
            .find(|r| r.min_amount <= amount)
            .map_or(1, |r| r.required_approvals)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(min: u128, required: u32) -> ApprovalRule {
        ApprovalRule {
            min_amount: Amount::new(min),
            required_approvals: required,
        }
    }

    #[test]
    fn the_highest_threshold_not_above_the_amount_applies() {
        let policy = ApprovalPolicy::new(vec![rule(1000, 2), rule(0, 1), rule(1_000_000, 3)])
            .expect("valid");
        assert_eq!(policy.required_for(Amount::new(1)), 1);
        assert_eq!(policy.required_for(Amount::new(999)), 1);
        assert_eq!(policy.required_for(Amount::new(1000)), 2);
        assert_eq!(policy.required_for(Amount::new(999_999)), 2);
        assert_eq!(policy.required_for(Amount::new(u128::MAX)), 3);
        assert_eq!(policy.rules()[0], rule(0, 1));
        assert_eq!(
            ApprovalPolicy::default().required_for(Amount::new(u128::MAX)),
            1
        );
    }

    #[test]
    fn invalid_rule_sets_are_refused() {
        assert_eq!(
            ApprovalPolicy::new(vec![rule(5, 1)]),
            Err(PolicyError::NoBaseRule)
        );
        assert_eq!(ApprovalPolicy::new(vec![]), Err(PolicyError::NoBaseRule));
        assert_eq!(
            ApprovalPolicy::new(vec![rule(0, 1), rule(0, 2)]),
            Err(PolicyError::DuplicateMinAmount)
        );
        assert_eq!(
            ApprovalPolicy::new(vec![rule(0, 0)]),
            Err(PolicyError::RequiredOutOfRange)
        );
        assert_eq!(
            ApprovalPolicy::new(vec![rule(0, 11)]),
            Err(PolicyError::RequiredOutOfRange)
        );
    }
}
