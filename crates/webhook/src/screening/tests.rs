use super::*;
use crate::secret::{Ed25519SigningKey, VerificationKey};
use crate::verify::{Headers, sign_v1a, verify};
use opledger_domain::approval::{
    KeyKind, RegisteredKey, TrustParts, TrustStatement, verifying_key,
};
use opledger_domain::ids::TenantId;

struct Provider {
    key: Ed25519SigningKey,
}

impl Provider {
    fn new(seed: u8) -> Provider {
        Provider {
            key: Ed25519SigningKey::from_seed(&[seed; 32]),
        }
    }

    fn registered(&self, kind: KeyKind) -> RegisteredKey {
        let public = verifying_key(&self.key.public_key().to_bytes()).expect("key");
        RegisteredKey::new(public, kind)
    }

    /// A delivery as the inbox stores it after `verify` accepted it.
    fn deliver(&self, id: &str, body: &[u8]) -> Delivered {
        let timestamp = 1_700_000_000;
        let entry = sign_v1a(&self.key, id, timestamp, body);
        let ts = timestamp.to_string();
        let headers = Headers::from_strs(id, &ts, &entry);
        let keys = [VerificationKey::Ed25519(self.key.public_key())];
        let verified = verify(&keys, &headers, body, timestamp, 300).expect("verifies");
        Delivered {
            id: id.to_owned(),
            timestamp,
            body: body.to_vec(),
            signature: verified.signature().map(|s| s.to_vec()),
        }
    }
}

struct Delivered {
    id: String,
    timestamp: i64,
    body: Vec<u8>,
    signature: Option<Vec<u8>>,
}

impl Delivered {
    fn stored(&self) -> StoredScreening<'_> {
        StoredScreening {
            event_id: &self.id,
            timestamp: self.timestamp,
            body: &self.body,
            signature: self.signature.as_deref(),
        }
    }
}

fn result(op: OperationId, verdict: &str) -> Vec<u8> {
    format!(
        r#"{{"type":"kyt.result","data":{{"operation_id":"{op}","result":"{verdict}","provider_ref":"chk-1"}}}}"#
    )
    .into_bytes()
}

fn trust(keys: Vec<RegisteredKey>) -> TrustStatement {
    TrustStatement::new(
        TenantId::new(),
        1,
        TrustParts {
            keys,
            ..TrustParts::default()
        },
    )
    .expect("trust statement")
}

fn judge_all(
    trust: &TrustStatement,
    op: OperationId,
    stored: &[&Delivered],
) -> Result<Screening, ScreeningRefusal> {
    let facts: Vec<StoredScreening<'_>> = stored.iter().map(|d| d.stored()).collect();
    judge(trust, op, &facts)
}

#[test]
fn a_pass_signed_by_a_kyt_key_of_the_trust_statement_counts() {
    let provider = Provider::new(1);
    let trust = trust(vec![provider.registered(KeyKind::Kyt)]);
    let op = OperationId::new();
    let pass = provider.deliver("evt-1", &result(op, "pass"));
    assert!(pass.signature.is_some(), "v1a keeps the signature");
    assert_eq!(judge_all(&trust, op, &[&pass]), Ok(Screening::Passed));
    assert_eq!(judge_all(&trust, op, &[]), Ok(Screening::Missing));
    // A signed failure wins over a pass, in any order.
    let fail = provider.deliver("evt-2", &result(op, "fail"));
    assert_eq!(
        judge_all(&trust, op, &[&pass, &fail]),
        Ok(Screening::Failed)
    );
    assert_eq!(
        judge_all(&trust, op, &[&fail, &pass]),
        Ok(Screening::Failed)
    );
}

#[test]
fn results_that_no_kyt_key_verifies_never_count() {
    let provider = Provider::new(1);
    let op = OperationId::new();
    let pass = provider.deliver("evt-1", &result(op, "pass"));
    // The same key registered as an approver, or not at all: nothing counts.
    for trust in [
        trust(vec![provider.registered(KeyKind::Approver)]),
        trust(vec![Provider::new(2).registered(KeyKind::Kyt)]),
    ] {
        assert_eq!(judge_all(&trust, op, &[&pass]), Ok(Screening::Missing));
    }
    let trust = trust(vec![provider.registered(KeyKind::Kyt)]);
    // A stored pass without a signature (a v1 delivery, or a row written by hand).
    let unsigned = Delivered {
        signature: None,
        ..provider.deliver("evt-1", &result(op, "pass"))
    };
    assert_eq!(judge_all(&trust, op, &[&unsigned]), Ok(Screening::Missing));
    // A failure's signature moved onto a forged pass body, another id or another time.
    let fail = provider.deliver("evt-2", &result(op, "fail"));
    let forged = [
        Delivered {
            body: result(op, "pass"),
            ..provider.deliver("evt-2", &result(op, "fail"))
        },
        Delivered {
            id: "evt-3".into(),
            ..provider.deliver("evt-2", &result(op, "pass"))
        },
        Delivered {
            timestamp: fail.timestamp + 1,
            ..provider.deliver("evt-2", &result(op, "pass"))
        },
        Delivered {
            signature: Some(vec![0; 63]),
            ..provider.deliver("evt-2", &result(op, "pass"))
        },
    ];
    for f in &forged {
        assert_eq!(judge_all(&trust, op, &[f]), Ok(Screening::Missing));
    }
    // A forged pass never outweighs a signed failure.
    assert_eq!(
        judge_all(&trust, op, &[&forged[0], &fail]),
        Ok(Screening::Failed)
    );
}

#[test]
fn a_genuine_result_about_another_withdrawal_refuses() {
    let provider = Provider::new(1);
    let trust = trust(vec![provider.registered(KeyKind::Kyt)]);
    let op = OperationId::new();
    let elsewhere = provider.deliver("evt-1", &result(OperationId::new(), "pass"));
    assert_eq!(
        judge_all(&trust, op, &[&elsewhere]),
        Err(ScreeningRefusal::Misplaced)
    );
    // A genuine delivery of another event type moved onto the withdrawal.
    let status = provider.deliver(
        "evt-2",
        format!(
            r#"{{"type":"transfer.status","data":{{"operation_id":"{op}","status":"confirmed"}}}}"#
        )
        .as_bytes(),
    );
    assert_eq!(
        judge_all(&trust, op, &[&status]),
        Err(ScreeningRefusal::Misplaced)
    );
}

#[test]
fn a_non_canonical_timestamp_keeps_no_signature() {
    let provider = Provider::new(1);
    let op = OperationId::new();
    let body = result(op, "pass");
    let timestamp = 1_700_000_000i64;
    let ts = format!("0{timestamp}");
    let entry = {
        // Signed over the timestamp text as sent, leading zero included.
        let content = signed_content("evt-1", &ts, &body);
        let sig =
            ed25519_dalek::Signer::sign(&ed25519_dalek::SigningKey::from_bytes(&[1; 32]), &content);
        format!(
            "v1a,{}",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, sig.to_bytes())
        )
    };
    let headers = Headers::from_strs("evt-1", &ts, &entry);
    let keys = [VerificationKey::Ed25519(provider.key.public_key())];
    let verified = verify(&keys, &headers, &body, timestamp, 300).expect("verifies");
    assert_eq!(verified.signature(), None);
}
