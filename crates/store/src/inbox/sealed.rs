//! The body sealed by the ingress (AEAD), as every part of the inbox stores it: delivery bodies,
//! quarantined bodies and HMAC endpoint secrets.

/// A body sealed by the ingress (AEAD): which key, the nonce and the ciphertext.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedBody {
    /// Id of the key that sealed it.
    pub key_id: i16,
    /// The AEAD nonce.
    pub nonce: Vec<u8>,
    /// Ciphertext with its tag.
    pub ciphertext: Vec<u8>,
}
