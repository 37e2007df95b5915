//! What the workers read: the due operations (`Due`, queued fairly by [`crate::queue`]), BROADCAST
//! operations with their attempts for the watcher, unresolved ones for the reconciler, inclusions
//! and escalations.
//!
//! Its parts: `due` (the broadcaster's due operation), `watch` (what the watcher looks at, and fee
//! bump candidates), `inclusions` (confirmations, the reorganization floor and reopened
//! inclusions), `releases` (applied releases the watcher re-checks, and their reopening) and
//! `escalations` (unresolved operations for the reconciler and operators, and escalations).

mod due;
mod escalations;
pub(crate) mod inclusions;
mod releases;
mod watch;

pub use crate::transition::Inclusion;
pub use due::Due;
pub use escalations::{Listed, Unresolved};
pub use releases::{AppliedRelease, ReleaseReopened};
pub use watch::Watching;
