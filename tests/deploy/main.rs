//! The deployment artifacts under `deploy/`, checked as data: no Docker, no Kubernetes, no
//! network, no database. A manifest that would fail at deploy time, or quietly weaken what the
//! deployment promises (non-root, read-only, the signer's closed network, real settings only,
//! dashboards on real metrics), fails here instead.
//!
//! `docker compose config` and `kubectl kustomize` are not needed: the few kustomize and compose
//! rules the artifacts rely on (generators, namespaces, `${VAR:-default}`, YAML merge keys) are
//! modelled in the helper modules below.
//!
//! Helpers: `common` (the services, files, YAML and JSON), `kustomize`, `compose_file`,
//! `settings` (the services' effective settings), `dockerfile`, `metrics` (PromQL and the
//! dashboard). Checks: the other modules, one area each.

// Helpers shared by the checks.
mod common;
mod compose_file;
mod dockerfile;
mod kustomize;
mod metrics;
mod settings;

// The checks, by area.
mod compose;
mod dev_stack;
mod health;
mod images;
mod kubernetes;
mod network_policy;
mod observability;
mod parsing;
mod principals;
mod secrets;
mod settings_checks;
mod signer_callers;
