//! A model of the custodian path (issue 27), checked with stateright: the domain's custodian
//! decisions (`opledger_domain::custodian`) driven through every interleaving of provider faults,
//! lookup lag and executor crashes, judged against the provider's own state.
//!
//! The model never decides anything itself. The executor ([`executor`]) decides with `after_submit`
//! and `after_lookup`, the witness ([`witness`]) with `witness_release` (which reads
//! `after_record`), the settlement with `judge_deposit` ([`chain`]); every move goes through
//! `opledger_domain::state::check_transition` with the store's compare-and-set, applying the hold
//! effect it returns, and a release only when `release_allowed` over the recorded records,
//! proposals and attestations says so ([`ledger`]). One rule is not the domain's yet: the release
//! rule of a bound `no_lookup` withdrawal, written once in [`bound`] for the executor and the
//! witness until the domain has it. What the model writes itself is the world around those
//! functions (the provider, the store, the network) and the executor's glue (which state a decision
//! moves to, as `services/custodian/src/executor.rs` has it). Mutants ([`config::Mutant`]) are
//! alternative closures ([`decisions`]), never changes to the domain.
//!
//! # What is modelled
//!
//! - **The provider** ([`provider`]), per profile (`lookup_by_reference`: Fireblocks v1,
//!   `one_send_per_reference`: BitGo, `no_lookup`: Coinbase Prime), as docs/custodian-wire.md
//!   has it. It stores at most one transaction per reference. A create of a free reference is
//!   stored and accepted, stored with its answer lost (timeout) or a 5xx, not stored with a 429,
//!   a lost connection or a refusal, or delayed in the network (a timeout now, stored when it
//!   arrives, or never); a create of a taken reference stores nothing and is answered with the
//!   profile's duplicate (1438/1439, `DuplicateSequenceIdError`), the first answer replayed
//!   (Fireblocks' Idempotency-Key, Coinbase's `idempotency_key`), a 429, a 5xx, a timeout or a
//!   refusal of its own (a 401); a resend of a free Fireblocks reference may get 1439 (after a
//!   first 5xx). A lookup by the reference finds the transaction only once the provider indexed
//!   it (lag), may fail, and otherwise returns its record. The record evolves on its own:
//!   SUBMITTED -> BROADCASTING (a hash) -> COMPLETED (paid), or FAILED with its hash, mined (paid)
//!   or not; SUBMITTED -> CANCELLING -> CANCELLED or BROADCASTING; SUBMITTED -> REJECTED or
//!   FAILED without a hash; a broadcast transaction may be replaced once (a new hash). Without
//!   lookup ([`CustodianConfig::foreign_candidate`]) the provider also lists a foreign
//!   transaction from the start: another withdrawal of ours to the same destination and amount,
//!   SUBMITTED, then COMPLETED (paid) or REJECTED on its own, at any moment.
//! - **The consistency window** is one boolean, "passed", that flips once after the first send:
//!   before, a "not found" is no answer; after, it is a resend of the same request. It never
//!   resets after a resend, so resends are explored as eagerly as the domain allows. Without
//!   lookup it is the listing's: it passes only once every request of ours the provider stored
//!   is listed and no create is still in the network (an assumption on the provider: its
//!   listing lag within the window, and Coinbase Prime refuses a request signed more than 30 s
//!   before it arrives), and a send restarts it.
//! - **The executor** ([`executor`]), one instance crash-restartable at every step boundary
//!   (after the claim, after the persist, after a send before its answer is recorded, after a
//!   lookup before its decision is applied, after a proposal before the release is asked, before
//!   the settlement), or two instances running at once whose leases may lapse (a stalled
//!   instance carries on with what it read). The store's guards are the compare-and-set on the
//!   state, the claim lease (held from the claim through the persist and the first send; the
//!   persist needs it, a claim is taken back only once it lapsed), the follow lease (a pass over
//!   a SIGNED, BROADCAST or UNKNOWN operation takes it after reading the operation as due) and
//!   the send's number: the store records a send only under a live lease of the sender's, and its
//!   number, not the pass's read, says whether it is the first. Any lease may lapse at any moment.
//!   A pass reads the store once; the state it read is the `from` of its moves, as in the
//!   service.
//! - **The store** ([`ledger`]): the state and hold, the leases, the numbered sends, the
//!   provider's records (each distinct content once: a lookup that finds what an earlier one
//!   found adds nothing the release rule reads), proposals, attestations, the witness's
//!   refusals, escalations.
//! - **The witness** ([`witness`]) judges each proposal from its own lookup of the request's
//!   reference (the provider's current record), with the domain's `witness_release`; without
//!   lookup, from its own listing of the bound transaction, and it attests only what the
//!   bound-release rule allows over its listing (otherwise it waits).
//! - **Bindings** (`no_lookup`, [`witness`]): an operator, careless, binds the operation once to
//!   either listed transaction (ours, or the foreign one) once it is left to it; another operator
//!   may bind the other withdrawal to the foreign transaction, which is then that withdrawal's
//!   concern (the model stops following it). The database takes a binding only of a BROADCAST
//!   or UNKNOWN withdrawal not yet bound, to a transaction not bound to another withdrawal
//!   (migration 37), whoever inserts it. The executor and the witness propose and attest a
//!   release of a bound withdrawal only on a listing read after the consistency window since
//!   our last send, when the bound transaction and every other listed candidate not bound to
//!   another withdrawal ended without a hash ([`bound`]).
//! - **Settlement** ([`chain`]): after a record with a hash, the executor asks the chain
//!   (`judge_deposit` over what the endpoints agree on, here the truth: a paid transaction is
//!   included at final depth paying the approved transfer, the foreign one as ours: same
//!   destination, same amount, hashes of its own) and settles BROADCAST -> CONFIRMED; on a
//!   network it does not watch ([`CustodianConfig::watched_network`]), a COMPLETED record settles
//!   alone.
//! - **A compromised executor login** ([`rogue`], [`CustodianConfig::compromised_executor`]):
//!   once the request is persisted, it may insert a REJECTED record of its own with a proposal,
//!   ask for any move of the custodian actor at any moment, and, without lookup, insert a
//!   binding to either transaction (listed or not) as the database takes it; it cannot attest.
//!
//! # Bounds and abstractions
//!
//! One operation; at most [`CustodianConfig::max_sends`] sends (2 or 3); one delayed create at
//! a time; two references at most (ours, and the fresh one only mutant 1 invents). The foreign
//! transaction only in `no_lookup` runs (the other profiles' state spaces are unchanged), and
//! not in the two mutant checks about sends and the ledger's rule (mutants 2 and 4, the world
//! they were written for): listed from the start, three phases (in flight, paid, rejected: what
//! the rule and the settlement tell apart), never replaced; the other withdrawal's own state
//! and hold are not modelled (bound to its transaction, it accounts for that payment), nor a
//! binding of the other withdrawal to our transaction (crossed bindings), nor Prime's
//! `TRANSACTION_RETRIED` (a new listed id for the same withdrawal, in flight to the rule). Not
//! modelled: a record that differs from the request (a security event, never a verdict), stale
//! lookups (an older record: in flight and without a hash, so it could only delay), unreadable
//! answers (ambiguous like the others), chain reorganizations and lying endpoints (the payout
//! model's), the operator's resolutions of a FAILED_TERMINAL withdrawal (it ends the run here),
//! webhooks (a webhook only wakes a follow, which the model takes at any time anyway).
//!
//! # Properties
//!
//! [`properties`] names them: one reference and one transaction per operation; never released while
//! the provider's transaction is or may be broadcast (every stored transaction ended without a
//! hash, no create in the network); a release only on a proposed terminal record without a hash
//! attested by the witness with its status (judged over the rows, not through the rule); an
//! executed withdrawal never released; a refusal keeps the hold, is concluded only while nothing is
//! stored, and a withdrawal failed on a refusal has nothing at the provider; a settlement only of
//! an executed withdrawal; the hold matches the state; every move in the table. Without lookup,
//! what the operation answers for is its request's transaction and the one bound to it: released,
//! neither is paid nor may be broadcast; settled, the bound one is paid (the foreign one's payment
//! settles ours only while it is not bound to the other withdrawal: one payment never settles two
//! withdrawals, held by the database's keys against a compromised login too). `sometimes`:
//! BROADCAST, executed with the hold held, settled, refused, released after a rejection, UNKNOWN
//! resolved by lookup, a resend deduplicated, a proposal awaiting the witness, a proposal the
//! witness refused, left to an operator without lookup, and, without lookup, bound by an operator
//! to the provider's listed transaction then settled, or attested and released, and, with the
//! foreign transaction, bound to it then settled on its payment or released, and a bound release
//! waiting on the other listed candidate. Mutants 5 and 6 are the bound-release rule on the bound
//! record alone (the review's F1: ours paid, the other withdrawal's rejected transaction bound and
//! attested, ours released) and the review's rule before the listing window (ours stored but not
//! listed yet, the other's rejected transaction the only one listed: released, then paid).

pub mod bound;
pub mod chain;
pub mod config;
pub mod decisions;
pub mod executor;
pub mod ghost;
pub mod ledger;
pub mod model;
pub mod properties;
pub mod provider;
pub mod report;
pub mod rogue;
pub mod state;
pub mod witness;

pub use config::{CustodianConfig, Mutant};
pub use model::CustodianModel;
pub use report::{CustodianReport, Discovery, check};
pub use state::{Action, Pc, State, Step};
