//! `opledger-admin keystore ...`: signer keystores (Ethereum keystore v3), with no database.

use crate::cli::{Kdf, KeystoreCommand};
use crate::output::print;
use anyhow::Context;

fn read_passphrase(path: &std::path::Path) -> anyhow::Result<zeroize::Zeroizing<Vec<u8>>> {
    let raw =
        zeroize::Zeroizing::new(std::fs::read(path).context("cannot read the passphrase file")?);
    let end = raw
        .iter()
        .rposition(|b| *b != b'\n' && *b != b'\r')
        .map_or(0, |i| i + 1);
    anyhow::ensure!(end >= 8, "the passphrase must have at least 8 bytes");
    Ok(zeroize::Zeroizing::new(raw[..end].to_vec()))
}

pub(crate) fn keystore(command: &KeystoreCommand, json: bool) -> anyhow::Result<()> {
    use opledger_evm::signer::{KdfCost, KeyProvider, LocalKey, encrypt_keystore};
    use rand::RngCore;
    let (secret, out, passphrase_file, kdf) = match command {
        KeystoreCommand::New {
            out,
            passphrase_file,
            kdf,
        } => {
            let mut secret = zeroize::Zeroizing::new([0_u8; 32]);
            rand::rng().fill_bytes(secret.as_mut());
            (secret, out, passphrase_file, kdf)
        }
        KeystoreCommand::Import {
            secret_file,
            out,
            passphrase_file,
            kdf,
        } => {
            let text = zeroize::Zeroizing::new(
                std::fs::read_to_string(secret_file).context("cannot read the secret file")?,
            );
            let hex_digits = text.trim().trim_start_matches("0x");
            let mut secret = zeroize::Zeroizing::new([0_u8; 32]);
            hex::decode_to_slice(hex_digits, secret.as_mut())
                .context("the secret file must hold 64 hex digits")?;
            (secret, out, passphrase_file, kdf)
        }
    };
    let cost = match kdf {
        Kdf::Standard => KdfCost::Standard,
        Kdf::Light => KdfCost::Light,
    };
    anyhow::ensure!(
        !out.exists(),
        "{} exists: refusing to overwrite a keystore",
        out.display()
    );
    let passphrase = read_passphrase(passphrase_file)?;
    let address = LocalKey::from_secret_bytes(secret.clone())?.address();
    let document = encrypt_keystore(&secret, &passphrase, cost, &mut rand::rng())?;
    std::fs::write(out, document).context("cannot write the keystore")?;
    let address = format!("{address:#x}");
    print(
        json,
        &address,
        serde_json::json!({ "address": address, "keystore": out.display().to_string() }),
    );
    Ok(())
}
