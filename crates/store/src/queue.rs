//! The broadcaster's queue: which due operations to work on next, fairly across tenants.
