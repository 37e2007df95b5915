//! The project's own hostile-input suite (`hostile_*`): seeded, time-bounded generation of
//! malformed protobuf bytes and gRPC framing faults for every method of every served service
//! (through a raw HTTP/2 client), hostile field values over the generated clients, malformed
//! HTTP/1.1 requests and hostile signed bodies at the webhook ingress, and the amount overflow
//! cases. After each batch every service must be alive, report SERVING, take a normal create and
//! acknowledge a normal signed webhook.
//!
//! Every test prints one line, `hostile: <test> seed=<seed> requests=<n> answers: <class>=<n> ...`,
//! with gRPC code names (or `reset`, `closed`, `http_<status>`) or HTTP status codes as classes.
//! The seed comes from `OPLEDGER_HOSTILE_SEED` when set (to replay a run), else at random.
//! No answer may ever be INTERNAL, UNKNOWN, a 5xx or a hang.

mod fields;
mod framing;
mod harness;
mod http1;
mod malformed;
mod metadata;
mod overflow;
mod protobuf;
mod values;
mod webhook;
mod wire;
