//! Hot-wallet keys that never sit in the signer's memory: a secp256k1 key pair generated inside a
//! PKCS#11 token ([`generate`]), its private half sensitive and not extractable, asked for a
//! signature of a 32-byte hash (`CKM_ECDSA`) by [`Pkcs11Key`], the signer's
//! [`KeyProvider`]. The token's answer becomes an Ethereum signature with no token involved
//! ([`recover::ethereum_signature`]: low s, recovery id by trial against the token's public key,
//! checked with the chain readers' recovery), so nothing the token says is trusted unchecked.
//!
//! One PKCS#11 module is initialised once per process ([`module`]). A wallet's token is called
//! from a thread of its own that holds the logged-in session ([`key`]; signatures by one wallet
//! are serial): a caller waits at most the wallet's timeout, so a token that hangs never holds a
//! runtime thread for longer, and a session the token lost (logged out, closed, the device
//! reset) is opened again, and the key checked again, before the signature is retried once. The
//! PIN is read from a file (at most 1 KiB) into zeroized memory and dropped after the login; no
//! error, log or `Debug` output holds it, an address being the only thing a key is named by
//! besides its label.
//!
//! A software token (SoftHSM2) is a library in the signer's own process that keeps the key on its
//! disk encrypted under the PIN: it protects the key no better than a keystore, so it is refused
//! unless the location allows it (`allow_software_token`: development and tests).

pub mod key;
pub mod recover;

pub use key::{Failures, Pkcs11Key, failures};

use alloy_primitives::Address;
use cryptoki::context::{CInitializeArgs, CInitializeFlags, Pkcs11};
use cryptoki::error::{Error as CkError, RvError};
use cryptoki::mechanism::Mechanism;
use cryptoki::object::{
    Attribute, AttributeInfo, AttributeType, KeyType, ObjectClass, ObjectHandle,
};
use cryptoki::session::{Session, UserType};
use cryptoki::types::AuthPin;
use k256::ecdsa::VerifyingKey;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};
use zeroize::Zeroizing;

/// The DER encoding of secp256k1's OID (1.3.132.0.10), the `CKA_EC_PARAMS` of every key.
pub const SECP256K1_PARAMS: [u8; 7] = [0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x0a];

/// Why a token could not be used. Never holds the PIN; names the token and key by their labels.
#[derive(Debug, thiserror::Error)]
pub enum HsmError {
    /// The module could not be loaded or initialised.
    #[error("the PKCS#11 module cannot be loaded or initialised: {0}")]
    Module(String),
    /// No slot holds a token with this label.
    #[error("no PKCS#11 token is labelled {0:?}")]
    NoToken(String),
    /// More than one slot holds a token with this label: which one is meant is not known.
    #[error("more than one PKCS#11 token is labelled {0:?}")]
    AmbiguousToken(String),
    /// The token's slot is not a hardware device (SoftHSM2, say) and the location does not allow
    /// a software token.
    #[error(
        "the token labelled {0:?} is a software token (the key in this process and on its disk): allowed only with allow_software_token, for development and tests"
    )]
    SoftwareToken(String),
    /// The PIN file could not be read, or is empty.
    #[error("cannot read the token's PIN file")]
    Pin,
    /// The token refused the login (a wrong PIN, a locked token).
    #[error("the token refused the login: {0}")]
    Login(String),
    /// No key pair with this label is in the token.
    #[error("no secp256k1 key labelled {0:?} in the token")]
    NoKey(String),
    /// More than one key (or a public half missing) with this label.
    #[error("the token holds more than one key, or a partial key, labelled {0:?}")]
    Ambiguous(String),
    /// [`generate`] refuses to add a second key under a label already used.
    #[error("the token already holds a key labelled {0:?}")]
    Exists(String),
    /// The key is not a secp256k1 key, or its public point cannot be read.
    #[error("the key labelled {0:?} is not a readable secp256k1 key")]
    NotSecp256k1(String),
    /// The key's private half could be read out of the token (not sensitive, or extractable):
    /// refused, a key that can leave the token is no HSM key.
    #[error("the key labelled {0:?} can leave the token (not sensitive, or extractable)")]
    Exposed(String),
    /// A call to the token failed.
    #[error("the token failed: {0}")]
    Token(String),
    /// A key label must be 1 to 32 bytes (what the signer's configuration accepts).
    #[error("a key label must be 1 to 32 bytes")]
    BadLabel,
}

/// A cryptoki error as text: the PKCS#11 return value and function, nothing of the caller's.
pub(crate) fn token_error(e: CkError) -> HsmError {
    HsmError::Token(e.to_string())
}

/// The initialised module at `path`, loaded once per process (PKCS#11 allows one
/// `C_Initialize` per module and process): every wallet of one module shares it.
pub fn module(path: &Path) -> Result<Pkcs11, HsmError> {
    static MODULES: OnceLock<Mutex<HashMap<PathBuf, Pkcs11>>> = OnceLock::new();
    let mut modules = MODULES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(loaded) = modules.get(path) {
        return Ok(loaded.clone());
    }
    let loaded = Pkcs11::new(path).map_err(|e| HsmError::Module(e.to_string()))?;
    match loaded.initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK)) {
        Ok(()) | Err(CkError::Pkcs11(RvError::CryptokiAlreadyInitialized, _)) => {}
        Err(e) => return Err(HsmError::Module(e.to_string())),
    }
    modules.insert(path.to_path_buf(), loaded.clone());
    Ok(loaded)
}

/// Where a key is: the module, the token's label, the key's label and the file holding the
/// user PIN. `Debug` shows the labels and paths, never the PIN (which is read only when used).
#[derive(Debug, Clone)]
pub struct KeyLocation {
    /// The PKCS#11 module (`/usr/lib/softhsm/libsofthsm2.so` for SoftHSM2).
    pub module: PathBuf,
    /// The token's label (`CKA_LABEL` of the token, as `softhsm2-util --init-token --label`).
    pub token_label: String,
    /// The key pair's label (`CKA_LABEL` of both halves).
    pub key_label: String,
    /// The file holding the user PIN (a trailing newline is ignored).
    pub pin_file: PathBuf,
    /// Whether a token in a slot that is not a hardware device (SoftHSM2) is accepted:
    /// development and tests only.
    pub allow_software_token: bool,
}

impl KeyLocation {
    /// A read-write session on the token, logged in as its user.
    pub(crate) fn session(&self) -> Result<Session, HsmError> {
        let pkcs11 = module(&self.module)?;
        let slots = pkcs11.get_slots_with_token().map_err(token_error)?;
        let labelled: Vec<_> = slots
            .into_iter()
            .filter(|slot| {
                pkcs11
                    .get_token_info(*slot)
                    .is_ok_and(|info| info.label() == self.token_label)
            })
            .collect();
        let slot = match labelled.as_slice() {
            [] => return Err(HsmError::NoToken(self.token_label.clone())),
            [slot] => *slot,
            _ => return Err(HsmError::AmbiguousToken(self.token_label.clone())),
        };
        let hardware = pkcs11
            .get_slot_info(slot)
            .map_err(token_error)?
            .hardware_slot();
        if !hardware && !self.allow_software_token {
            return Err(HsmError::SoftwareToken(self.token_label.clone()));
        }
        let session = pkcs11.open_rw_session(slot).map_err(token_error)?;
        let pin = read_pin(&self.pin_file)?;
        match session.login(UserType::User, Some(&pin)) {
            // Login state is per token and process: another wallet's session may have done it.
            Ok(()) | Err(CkError::Pkcs11(RvError::UserAlreadyLoggedIn, _)) => Ok(session),
            Err(CkError::Pkcs11(rv, _)) => Err(HsmError::Login(format!("{rv:?}"))),
            Err(e) => Err(HsmError::Login(e.to_string())),
        }
    }
}

/// The PIN in `path` (at most 1 KiB), without a trailing newline.
fn read_pin(path: &Path) -> Result<AuthPin, HsmError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|_| HsmError::Pin)?;
    let mut raw = Zeroizing::new(String::with_capacity(1025));
    file.take(1025)
        .read_to_string(&mut raw)
        .map_err(|_| HsmError::Pin)?;
    if raw.len() > 1024 {
        return Err(HsmError::Pin);
    }
    let pin = raw.trim_end_matches(['\n', '\r']);
    if pin.is_empty() {
        return Err(HsmError::Pin);
    }
    Ok(AuthPin::new(pin.into()))
}

/// The private and public halves labelled `label`: exactly one of each.
pub(crate) fn key_pair(
    session: &Session,
    label: &str,
) -> Result<(ObjectHandle, ObjectHandle), HsmError> {
    let find = |class| {
        session
            .find_objects(&[
                Attribute::Class(class),
                Attribute::Label(label.as_bytes().to_vec()),
            ])
            .map_err(token_error)
    };
    let (private, public) = (
        find(ObjectClass::PRIVATE_KEY)?,
        find(ObjectClass::PUBLIC_KEY)?,
    );
    let (private, public) = match (private.as_slice(), public.as_slice()) {
        ([], []) => return Err(HsmError::NoKey(label.to_owned())),
        ([private], [public]) => (*private, *public),
        _ => return Err(HsmError::Ambiguous(label.to_owned())),
    };
    // The halves of one pair carry one CKA_ID (ours always do): the halves of two pairs that
    // share a label are no pair.
    let id = |half| {
        session
            .get_attributes(half, &[AttributeType::Id])
            .map_err(token_error)
            .map(|found| {
                found.into_iter().find_map(|a| match a {
                    Attribute::Id(id) => Some(id),
                    _ => None,
                })
            })
    };
    if id(private)? != id(public)? {
        return Err(HsmError::Ambiguous(label.to_owned()));
    }
    Ok((private, public))
}

/// The secp256k1 public key of `public`.
pub(crate) fn public_key(
    session: &Session,
    public: ObjectHandle,
    label: &str,
) -> Result<VerifyingKey, HsmError> {
    let not_ours = || HsmError::NotSecp256k1(label.to_owned());
    let attributes = session
        .get_attributes(public, &[AttributeType::EcParams, AttributeType::EcPoint])
        .map_err(token_error)?;
    let mut params = None;
    let mut point = None;
    for attribute in attributes {
        match attribute {
            Attribute::EcParams(p) => params = Some(p),
            Attribute::EcPoint(p) => point = Some(p),
            _ => {}
        }
    }
    if params.as_deref() != Some(&SECP256K1_PARAMS[..]) {
        return Err(not_ours());
    }
    point
        .as_deref()
        .and_then(recover::public_key_of_ec_point)
        .ok_or_else(not_ours)
}

/// What the token says about a private key's value: whether it is sensitive (never revealed)
/// and not extractable (never wrapped out), and what reading its value gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Protection {
    /// `CKA_SENSITIVE`.
    pub sensitive: bool,
    /// `CKA_EXTRACTABLE`.
    pub extractable: bool,
    /// `CKA_ALWAYS_SENSITIVE` and `CKA_NEVER_EXTRACTABLE`: so since it was made.
    pub always_protected: bool,
    /// Whether the token reports the value (`CKA_VALUE`) as sensitive when asked for it.
    pub value_withheld: bool,
}

impl Protection {
    /// Sensitive, not extractable, always so, and the value withheld.
    pub fn holds(&self) -> bool {
        self.sensitive && !self.extractable && self.always_protected && self.value_withheld
    }

    /// What a key must show to be used: [`Protection::holds`]; on a software token (development
    /// and tests only), a key imported with its value and sensitive and not extractable from
    /// then on is accepted too, since that token keeps every key on its disk anyway.
    pub fn usable(&self, software_token: bool) -> bool {
        self.holds()
            || (software_token && self.sensitive && !self.extractable && self.value_withheld)
    }
}

/// How `private` is protected, read from the token.
pub(crate) fn protection(session: &Session, private: ObjectHandle) -> Result<Protection, HsmError> {
    let flags = session
        .get_attributes(
            private,
            &[
                AttributeType::Sensitive,
                AttributeType::Extractable,
                AttributeType::AlwaysSensitive,
                AttributeType::NeverExtractable,
            ],
        )
        .map_err(token_error)?;
    let mut seen = HashMap::new();
    for attribute in flags {
        let (kind, value) = match attribute {
            Attribute::Sensitive(v) => ("sensitive", v),
            Attribute::Extractable(v) => ("extractable", v),
            Attribute::AlwaysSensitive(v) => ("always_sensitive", v),
            Attribute::NeverExtractable(v) => ("never_extractable", v),
            _ => continue,
        };
        seen.insert(kind, value);
    }
    let flag = |kind| seen.get(kind).copied();
    let value = session
        .get_attribute_info(private, &[AttributeType::Value])
        .map_err(token_error)?;
    Ok(Protection {
        sensitive: flag("sensitive") == Some(true),
        // Absent is read as extractable: only an explicit false counts.
        extractable: flag("extractable") != Some(false),
        always_protected: flag("always_sensitive") == Some(true)
            && flag("never_extractable") == Some(true),
        value_withheld: matches!(value.as_slice(), [AttributeInfo::Sensitive]),
    })
}

/// Generates a secp256k1 key pair labelled `location.key_label` inside the token: the private
/// half on the token, private, sensitive, not extractable, for signing only; returns its
/// Ethereum address. Refused when the label is already used (a key is never replaced).
pub fn generate(location: &KeyLocation) -> Result<Address, HsmError> {
    let label = location.key_label.as_str();
    if label.is_empty() || label.len() > 32 {
        return Err(HsmError::BadLabel);
    }
    let session = location.session()?;
    match key_pair(&session, label) {
        Err(HsmError::NoKey(_)) => {}
        Ok(_) | Err(HsmError::Ambiguous(_)) => return Err(HsmError::Exists(label.to_owned())),
        Err(e) => return Err(e),
    }
    let id: [u8; 16] = rand::random();
    let common = |private: bool| {
        vec![
            Attribute::Token(true),
            Attribute::Private(private),
            Attribute::Label(label.as_bytes().to_vec()),
            Attribute::Id(id.to_vec()),
            Attribute::KeyType(KeyType::EC),
        ]
    };
    let mut public = common(false);
    public.extend([
        Attribute::EcParams(SECP256K1_PARAMS.to_vec()),
        Attribute::Verify(true),
    ]);
    let mut private = common(true);
    private.extend([
        Attribute::Sensitive(true),
        Attribute::Extractable(false),
        Attribute::Sign(true),
    ]);
    let (public, private) = session
        .generate_key_pair(&Mechanism::EccKeyPairGen, &public, &private)
        .map_err(token_error)?;
    let key = public_key(&session, public, label)?;
    // What the token made is what was asked for, or the key is not used.
    if !protection(&session, private)?.holds() {
        return Err(HsmError::Exposed(label.to_owned()));
    }
    Ok(Address::from_public_key(&key))
}

/// How the key at `location` is protected (for `opledger-admin hsm` and the tests).
pub fn inspect(location: &KeyLocation) -> Result<(Address, Protection), HsmError> {
    let session = location.session()?;
    let (private, public) = key_pair(&session, &location.key_label)?;
    let key = public_key(&session, public, &location.key_label)?;
    Ok((
        Address::from_public_key(&key),
        protection(&session, private)?,
    ))
}
