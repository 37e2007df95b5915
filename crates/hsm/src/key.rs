//! [`Pkcs11Key`]: a hot wallet's key in a PKCS#11 token, the signer's [`KeyProvider`]. The token
//! is called from a thread of the wallet's own that holds the logged-in session; a caller waits
//! at most the wallet's timeout. A failed call drops the session: the thread opens it again
//! (slot, login, key, the same public key and protection as at the start) and retries the
//! signature once, so a token that lost the session, the login or its device recovers without a
//! restart, while a key that changed under the label is never used.

use crate::{HsmError, KeyLocation, key_pair, protection, public_key, recover, token_error};
use alloy_primitives::{Address, B256, Signature};
use cryptoki::mechanism::Mechanism;
use cryptoki::object::ObjectHandle;
use cryptoki::session::Session;
use k256::ecdsa::VerifyingKey;
use opledger_evm::signer::{KeyProvider, SignError};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{OnceLock, mpsc};
use std::time::Duration;

/// What went wrong with this process's tokens since it started (the signer's `/metrics`).
#[derive(Debug, Default)]
pub struct Failures {
    /// Signatures the token did not answer within the wallet's timeout.
    pub timeouts: AtomicU64,
    /// Signatures the token refused or failed (after the session was opened again once).
    pub token_errors: AtomicU64,
    /// Answers that were no signature of the key over the hash (never used).
    pub bad_signatures: AtomicU64,
    /// Sessions opened again after a failed call.
    pub reopened: AtomicU64,
}

impl Failures {
    /// The counters in Prometheus text format.
    pub fn render(&self) -> String {
        let count = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "# HELP opledger_signer_key_failures_total Signatures a PKCS#11 key failed to give, \
             by kind: timeout (no answer within sign_timeout_ms), token (refused or failed after \
             one reopen), signature (the answer did not recover to the key). Nothing was stored \
             for any of them; the claim was given back.\n\
             # TYPE opledger_signer_key_failures_total counter\n\
             opledger_signer_key_failures_total{{kind=\"timeout\"}} {}\n\
             opledger_signer_key_failures_total{{kind=\"token\"}} {}\n\
             opledger_signer_key_failures_total{{kind=\"signature\"}} {}\n\
             # HELP opledger_signer_token_sessions_reopened_total Token sessions opened again \
             after a failed call.\n\
             # TYPE opledger_signer_token_sessions_reopened_total counter\n\
             opledger_signer_token_sessions_reopened_total {}\n",
            count(&self.timeouts),
            count(&self.token_errors),
            count(&self.bad_signatures),
            count(&self.reopened),
        )
    }
}

/// This process's token failure counters.
pub fn failures() -> &'static Failures {
    static FAILURES: OnceLock<Failures> = OnceLock::new();
    FAILURES.get_or_init(Failures::default)
}

/// A logged-in session on the key's token and the key's private half there.
struct Opened {
    session: Session,
    private: ObjectHandle,
}

impl Opened {
    /// Opens `location`'s key: the token present, the PIN right, the key pair there once,
    /// secp256k1, sensitive and never extractable. Its public key.
    fn open(location: &KeyLocation) -> Result<(Opened, VerifyingKey), HsmError> {
        let session = location.session()?;
        let label = location.key_label.as_str();
        let (private, public) = key_pair(&session, label)?;
        let public = public_key(&session, public, label)?;
        if !protection(&session, private)?.usable(location.allow_software_token) {
            return Err(HsmError::Exposed(label.to_owned()));
        }
        Ok((Opened { session, private }, public))
    }

    /// The token's raw answer (r||s) for `hash`.
    fn sign(&self, hash: &B256) -> Result<Vec<u8>, HsmError> {
        self.session
            .sign(&Mechanism::Ecdsa, self.private, hash.as_slice())
            .map_err(token_error)
    }
}

/// One signature asked of a wallet's token thread.
struct Job {
    hash: B256,
    answer: mpsc::SyncSender<Result<Vec<u8>, String>>,
}

/// A hot wallet's key in a PKCS#11 token. Opened only when the key is there, is secp256k1,
/// cannot leave the token, and signs a probe hash that recovers to its public key.
pub struct Pkcs11Key {
    /// `None` only while dropping.
    jobs: Option<mpsc::Sender<Job>>,
    /// The token thread, joined on drop so that its session is closed before anything else
    /// (the process's exit, say) tears the module down.
    thread: Option<std::thread::JoinHandle<()>>,
    public: VerifyingKey,
    address: Address,
    label: String,
    timeout: Duration,
}

impl fmt::Debug for Pkcs11Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pkcs11Key")
            .field("label", &self.label)
            .field("address", &self.address)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Pkcs11Key {
    /// Opens the key at `location` and starts its token thread; a signature not answered within
    /// `timeout` is an error (nothing was signed for the caller). Refused unless the token is
    /// present, the PIN right, the key pair there once (one `CKA_ID`), secp256k1, sensitive and
    /// never extractable, and a probe signature recovers to its public key.
    pub fn open(location: &KeyLocation, timeout: Duration) -> Result<Pkcs11Key, HsmError> {
        let (opened, public) = Opened::open(location)?;
        let address = Address::from_public_key(&public);
        let probe = alloy_primitives::keccak256(b"opledger-hsm: a probe signature at open");
        let raw = opened.sign(&probe)?;
        recover::ethereum_signature(&raw, &probe, &public, address)
            .map_err(|e| HsmError::Token(e.to_string()))?;
        let (jobs, queue) = mpsc::channel::<Job>();
        let thread_location = location.clone();
        let thread = std::thread::Builder::new()
            .name(format!("pkcs11-{}", location.key_label))
            .spawn(move || serve(thread_location, opened, public, queue))
            .map_err(|e| HsmError::Token(format!("cannot start the token thread: {e}")))?;
        Ok(Pkcs11Key {
            jobs: Some(jobs),
            thread: Some(thread),
            public,
            address,
            label: location.key_label.clone(),
            timeout,
        })
    }
}

/// The token thread: signs each job with the open session; on a failure, opens the key again
/// (it must still be `public`) and retries once. Ends when the key is dropped.
fn serve(location: KeyLocation, opened: Opened, public: VerifyingKey, queue: mpsc::Receiver<Job>) {
    let mut current = Some(opened);
    while let Ok(job) = queue.recv() {
        let mut answer = signed(&location, &mut current, &public, &job.hash);
        if answer.is_err() {
            tracing::warn!(key = %location.key_label, "the token failed to sign: opening its session again");
            failures().reopened.fetch_add(1, Ordering::Relaxed);
            current = None;
            answer = signed(&location, &mut current, &public, &job.hash);
        }
        if answer.is_err() {
            current = None;
        }
        // The caller may have stopped waiting (its timeout): the answer is then dropped.
        let _ = job.answer.send(answer.map_err(|e| e.to_string()));
    }
}

/// `hash` signed through `current`, opened first when there is none (the key must be `public`).
fn signed(
    location: &KeyLocation,
    current: &mut Option<Opened>,
    public: &VerifyingKey,
    hash: &B256,
) -> Result<Vec<u8>, HsmError> {
    if current.is_none() {
        let (opened, found) = Opened::open(location)?;
        if found != *public {
            tracing::error!(key = %location.key_label, "the key under the wallet's label is another key: refused");
            return Err(HsmError::Ambiguous(location.key_label.clone()));
        }
        *current = Some(opened);
    }
    match current {
        Some(opened) => opened.sign(hash),
        None => Err(HsmError::NoKey(location.key_label.clone())),
    }
}

impl Drop for Pkcs11Key {
    fn drop(&mut self) {
        // The thread ends when its queue closes, closing the session on its way out.
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl KeyProvider for Pkcs11Key {
    fn address(&self) -> Address {
        self.address
    }

    fn sign_hash(&self, hash: &B256) -> Result<Signature, SignError> {
        let (answer, answered) = mpsc::sync_channel(1);
        self.jobs
            .as_ref()
            .ok_or_else(|| SignError::Provider("the token's thread has stopped".to_owned()))?
            .send(Job {
                hash: *hash,
                answer,
            })
            .map_err(|_| SignError::Provider("the token's thread has stopped".to_owned()))?;
        let raw = match answered.recv_timeout(self.timeout) {
            Ok(Ok(raw)) => raw,
            Ok(Err(why)) => {
                failures().token_errors.fetch_add(1, Ordering::Relaxed);
                return Err(SignError::Provider(format!("the token failed: {why}")));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                failures().timeouts.fetch_add(1, Ordering::Relaxed);
                return Err(SignError::Provider(format!(
                    "the token did not answer within {} ms",
                    self.timeout.as_millis()
                )));
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(SignError::Provider(
                    "the token's thread has stopped".to_owned(),
                ));
            }
        };
        recover::ethereum_signature(&raw, hash, &self.public, self.address).map_err(|e| {
            failures().bad_signatures.fetch_add(1, Ordering::Relaxed);
            SignError::Provider(e.to_string())
        })
    }
}
