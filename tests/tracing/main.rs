//! Distributed tracing: an in-process OTLP/gRPC collector receives the spans of the services (run
//! in-process, and as real processes configured by `OTEL_*` variables) and the tests check that
//! one withdrawal is one trace across the five services, that every webhook is traced, that log
//! lines carry trace ids, and that nothing sensitive is exported or logged.

mod collector;
mod processes;
mod webhook;
mod withdrawal;
