//! A model of payouts on one chain, checked with stateright: the domain's decision functions
//! (`opledger_domain::evidence`) driven through every interleaving of attempts, crashes, lost
//! responses, reorganizations, a lying or lagging endpoint and webhooks.
//!
//! The model never decides anything itself. Each worker evaluation calls the domain's own
//! `agree`, `decide`, `watcher_step`, `next_step` and `resolution_allowed`; the witness calls
//! `attest_release`; the signer calls `replacement_sender` and `replacement_kind`; every
//! attempt's role comes from `role_of` on its decoded content and `AttemptKind::check`; every
//! state move goes through `opledger_domain::state::check_transition` and applies the hold effect
//! it returns, a release of the hold only when `opledger_domain::witness::release_allowed` says
//! so over the recorded proposals and attestations. What the model adds is the world around those
//! functions, and a ground truth ([`truth`]) read straight from the modelled chain to judge what
//! the workers did. It must never copy a decision into itself: a fix in the domain is checked here
//! without a change here. The only decisions written here are the old ones ([`legacy`]), kept to
//! show the model finds what they got wrong, and three mutants: a reconciler that never escalates
//! (caught by the liveness check), a ledger that releases on a proposal alone (caught paying
//! twice), and a ledger whose release rule still counts proofs marked reorganized away (caught
//! leaving a paid transfer's hold released).
//!
//! # What is modelled
//!
//! - **One operation, one nonce.** A SIGNED withdrawal whose original attempt (a transfer from
//!   wallet A) is persisted. The chain ([`chain`]) keeps, for wallet A's nonce and for the same
//!   nonce of wallet B (another account: its nonce is its own), what consumed it and in which
//!   block, and which attempts' bytes were ever submitted. A block includes at most one of these
//!   transactions; a block's hash derives from its number and the inclusions at or below it.
//! - **Attempts.** The original, at most one fee bump (the broadcaster's, BROADCAST only) and
//!   cancels (the reconciler's, UNKNOWN only), three attempts at most. A fee bump re-signs the
//!   latest attempt's content, so a bump of a cancel is a cancel (`replacement_kind`).
//! - **Submission.** Bytes, once submitted, stay submittable: anyone who saw them can replay
//!   them, and any stored attempt may be published at any time (by its worker, by a rebroadcast,
//!   or by someone who read the store). A transaction whose sender's nonce is unconsumed may be
//!   mined at any block, reverted or not.
//! - **Reorganizations.** Up to [`Config::reorgs`] of them, each replacing the top
//!   [`Config::reorg_depth`] blocks or fewer (at least one including a transaction of ours) by as
//!   many new blocks, which may include a transaction again (the same, another, or nothing).
//! - **Rotation.** The tenant's current wallet may change once, from A to B; the signer keeps A's
//!   key, or may drop it ([`config::Rotation`]). With a compromised key ([`Config::compromised_key`])
//!   someone else may mine a transaction of their own at A's nonce.
//! - **Endpoints** ([`endpoints`]). A reader pins the head or up to [`Config::pin_back`] blocks
//!   below it. An honest endpoint answers the canonical chain at the pinned block, or nothing; a
//!   lagging one likewise, with its head behind (nothing above its head); the liar answers the
//!   truth (with its own head or one far ahead), nothing, or one of a repertoire of
//!   fabrications. Every combination goes through `agree(answers, quorum, max_lag)`, and every
//!   distinct result is evidence a worker may hold.
//! - **Workers** ([`workers`]). The watcher evaluates BROADCAST operations (`decide`, then
//!   `watcher_step`) and checks CONFIRMED ones for reorganizations (the recorded inclusion is no
//!   longer where an agreed reading, pinned at or above it, puts the attempt: CONFIRMED ->
//!   BROADCAST, the hold re-established), and VERIFIED_NOT_SENT ones for reorganized release
//!   proofs (an attested, unmarked proof whose attempt an agreed reading, pinned at or above its
//!   block, no longer shows in that block: `opledger_reopen_release`, which marks the proof and,
//!   unless another witnessed proof stands, moves VERIFIED_NOT_SENT -> UNKNOWN through
//!   `check_transition`, the hold held again). The reconciler evaluates UNKNOWN and BROADCAST ones
//!   (`decide`, then `next_step` with a `Timing` in which each window has elapsed or not, chosen
//!   at each evaluation). An operator resolves UNKNOWN and FAILED_TERMINAL ones when
//!   `resolution_allowed` says the evidence read now supports the outcome.
//! - **Two witnesses for a release** ([`witness`], [`store`]). A release of the hold of a signed
//!   operation needs a proposal and an attestation of the same evidence (the attempt's hash and
//!   the including block), each table keyed by the evidence, an attestation naming a recorded
//!   proposal. When its verdict allows a release, the reconciler (or an operator, through
//!   `resolution_allowed`) records a proposal of the evidence its verdict names, then asks for one
//!   move: BROADCAST -> UNKNOWN, or UNKNOWN -> VERIFIED_NOT_SENT, which the store refuses (the
//!   operation stays UNKNOWN, the hold held) until the release rule allows it; a later evaluation
//!   asks again. The store keeps the proofs the watcher marked reorganized away
//!   (`release_reorgs`) and its release rule leaves them out, as `opledger_release_witnessed`
//!   does since migration 31: a reopened release is released again only on a new proposal and a
//!   new attestation. The witness, a separate principal with its own endpoints
//!   ([`Config::witness_endpoints`], quorum and pinning depth), judges each proposal in its queue
//!   with `decide` on its own reading and `attest_release`: it attests, refuses for good (the
//!   proposal leaves its queue), or reads again later. It reads and records in one step.
//! - **A compromised principal** ([`rogue`], [`Config::compromised`]), one at a time: the
//!   reconciler's login (any proposal as the reconciler or an operator, any move of the
//!   reconciler or an operator, a request to release at any moment), the witness's login (an
//!   attestation of any recorded proposal at any moment), or an operator skipping the evidence
//!   check. The honest services keep running beside it.
//! - **Crashes and lost answers.** An evaluation and its commit are separate steps; in between,
//!   any other step may happen, and the worker may crash instead of committing (nothing written).
//!   A commit whose answer is lost changes nothing more: the worker reads the store again on its
//!   next evaluation. A release from BROADCAST is at least two commits (BROADCAST -> UNKNOWN,
//!   then UNKNOWN -> VERIFIED_NOT_SENT once witnessed), each after an evaluation of its own. The
//!   store refuses a commit when the operation's state changed since the worker read it. The signer's commit of a cancel may
//!   crash before it persists (nothing signed) or after (the cancel is stored; the reconciler
//!   does not know, and the next evaluation finds it as the latest attempt).
//! - **Webhooks.** A webhook about the operation, whatever it claims, duplicated, reordered or
//!   forged, only triggers a watcher evaluation; since a webhook may arrive at any time with any
//!   claim, no queue is kept: each delivery is an evaluation at that moment
//!   ([`config::Webhooks::Hints`]). The old processor that trusted a claimed confirmation is
//!   [`config::Webhooks::TrustClaims`].
//!
//! # Abstractions and assumptions
//!
//! - Time is abstract: the reconciler's windows are booleans chosen at each evaluation, so it may
//!   sign a cancel or escalate at any moment the domain's `next_step` allows.
//! - A worker reads the store's attempts and the endpoints' answers in one step (an evaluation);
//!   the chain cannot move between the two reads of one evaluation. [`Config::split_read`] makes
//!   them two steps, as I/O code has them: a replacement persisted in between, mined to final
//!   depth before the endpoints are asked, then looks like a nonce moved without us (a false
//!   alarm to security, the hold kept), which a test shows.
//! - The liar's fabrications are a fixed repertoire (hidden receipts with the nonce as it is,
//!   unconsumed, or consumed; a receipt, succeeded or reverted, at final depth or pending, for
//!   each attempt; every inclusion counted final; a nonce one too high), not every possible
//!   reading. With a quorum of two or more and one liar, any agreement includes an honest
//!   answer, so the repertoire only matters for a quorum of one, which a test checks.
//! - **Reorganizations are shallower than finality** ([`Config::reorg_depth`] below
//!   [`Config::confirmations`]) for the safety properties about settlement: with deeper ones, a
//!   settled transfer can be reorganized away, which the reorganization check answers by
//!   reopening the operation, and so can a release's proof, which the watcher answers by
//!   reopening the release; tests show exactly that, and what still breaks.
//! - The watcher's re-check of release proofs has no window: the explored chain is shorter than
//!   any reorganization window, so every proof is re-checked while the chain is explored. The
//!   escalation `opledger_reopen_release` records, and the ledger's `available` going negative
//!   when the released funds were spent, are not modelled (one operation, one hold).
//! - The chain is bounded ([`Config::max_height`]); the liveness check continues past it.
//! - Liveness assumes the faults stop ([`liveness`]). With [`Config::persistent_fault`] a faulty
//!   endpoint stays faulty instead; since `agree` needs every answering endpoint to agree, one
//!   that keeps lying (or one of two that keeps lagging) blocks every verdict; the reconciler
//!   then escalates the operation after its window without a verdict (`next_step` escalates
//!   from BROADCAST as from UNKNOWN), which a test pins.
//! - One watcher and one reconciler (each with at most one evaluation in flight), an operator, a
//!   witness, a broadcaster and a signer; the store's compare-and-set on the state stands for the
//!   row lock that serializes them.
//! - The witness reads and records in one step: a crash before its insert is an evaluation that
//!   did nothing, and what it attests is an inclusion at final depth, which reorganizations
//!   shallower than finality cannot undo before the insert.
//! - A compromised principal takes at most [`Config::rogue_steps`] proposals, attestations or
//!   moves per run (its requests to release are unbounded), checked in a smaller world: one
//!   proposal the witness attests is all a release needs, and its moves change nothing the
//!   witness reads. A lying quorum of the reconciler's own endpoints can only make it propose what
//!   its compromised login may propose, so that login's check covers it.
//!
//! # Properties
//!
//! [`properties`] names them. (1) At most one value-moving transaction of the operation (a
//! transfer of ours whose receipt succeeded) is in the canonical chain at any time, and at most
//! one ever reaches final depth over the whole run, every history replaced by a reorganization
//! counted. (2) A hold is settled only when the recorded attempt is our transfer, succeeded, in
//! the canonical chain at the recorded block, at final depth, at the moment of settlement; and a
//! settled hold's transfer stays so. (3) A hold is released only when our own cancel succeeded,
//! or an attempt of ours reverted, at final depth at the moment of release; while released, no
//! transfer of ours is in the canonical chain (no double payment) nor can get there (every
//! transfer attempt's nonce is consumed at final depth). (3''') A proof marked reorganized away
//! never releases again: every release rests on evidence both proposed and attested that is not
//! marked. (3'''') No double payment once the watcher has had its turn: in every state where the
//! hold is released and a transfer of ours is in the canonical chain, the watcher's re-check of
//! the release's proofs (honest quorum at the head, repeated until it decides nothing) holds the
//! hold again; this holds with reorganizations deeper than finality, where (3) does not (the
//! watcher lags a miner by design). (4) UNKNOWN is left
//! only on a step the honest chain supported when it was decided. (5) Every approved operation
//! ends terminal or escalated: from every reachable state, every fair continuation
//! ([`liveness`]) reaches CONFIRMED, VERIFIED_NOT_SENT or FAILED_TERMINAL with an escalation;
//! with honest principals, from every state where our cancel is at final depth (not escalated),
//! every fair continuation releases the hold (proposal, attestation, release); (5'') with
//! reorganizations deeper than finality, from every state after a release was reopened, every
//! fair continuation decides it again (settled, released on unmarked evidence, or escalated).
//! And:
//! the hold matches the state, every step is its worker's own and in the transition table, an
//! escalation's cause holds. `sometimes` properties show settlement, release by a cancel,
//! escalations, a settlement by the fee bump, a bump of a cancel stored as a cancel, a
//! reorganized transfer, a replacement after a rotation and a proposal awaiting the witness are all
//! reached, with a compromised proposer, a proposal the witness refused for good, and with
//! reorganizations deeper than finality, a reopened confirmation, a reopened release, and a
//! reopened release settled and released again.

pub mod chain;
pub mod config;
pub mod custodian;
pub mod endpoints;
pub mod legacy;
pub mod liveness;
pub mod model;
pub mod properties;
pub mod report;
pub mod rogue;
pub mod store;
pub mod truth;
pub mod witness;
pub mod workers;

pub use config::{
    Compromised, Config, Decisions, Endpoint, ReleaseRule, ReplacementRule, Rotation, Side,
    Webhooks,
};
pub use model::{Action, PayoutModel, State, Worker};
pub use report::{Discovery, Report, Until, check};
