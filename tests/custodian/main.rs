//! The custodian executor against the conformance double (a real process executing real
//! transfers on anvil): a withdrawal routed to a custodian is sent once under our reference, its
//! request persisted with its hash before the call; an answer lost after the provider accepted
//! becomes UNKNOWN and is found again by lookup; a lookup that does not know the reference after
//! the consistency window resends the same request, which the provider deduplicates; a terminal
//! record without a transaction releases nothing until the witness attests it from its own lookup
//! (and a proposal its own lookup contradicts is refused); two executors never send twice. Every
//! test checks the chain: one transfer per withdrawal, at most.

mod answered;
mod classes;
mod erc20;
mod faults;
mod flow;
mod guards;
mod no_lookup;
mod reorg;
mod witness;

/// Tenant `acme` with 0.1 ETH in `treasury`: what every custodian test withdraws from.
pub(crate) async fn funded(
    stack: &opledger_tests::Stack,
) -> anyhow::Result<opledger_tests::Tenant> {
    let acme = stack.tenant("acme").await?;
    stack
        .fund(&acme, "treasury", "ETH", "100000000000000000")
        .await?;
    Ok(acme)
}
