//! `opledger-admin hsm ...`: signer keys generated and kept inside a PKCS#11 token, with no
//! database. The PIN is read from a file and never printed.

use crate::cli::{HsmCommand, HsmKey};
use crate::output::print;

fn location(key: &HsmKey) -> opledger_hsm::KeyLocation {
    opledger_hsm::KeyLocation {
        module: key.module.clone(),
        token_label: key.token_label.clone(),
        key_label: key.key_label.clone(),
        pin_file: key.pin_file.clone(),
        allow_software_token: key.allow_software_token,
    }
}

pub(crate) fn hsm(command: &HsmCommand, json: bool) -> anyhow::Result<()> {
    match command {
        HsmCommand::Keygen { key } => {
            let address = format!("{:#x}", opledger_hsm::generate(&location(key))?);
            print(
                json,
                &address,
                serde_json::json!({
                    "address": address,
                    "token_label": key.token_label,
                    "key_label": key.key_label,
                }),
            );
        }
        HsmCommand::Show { key } => {
            let (address, protection) = opledger_hsm::inspect(&location(key))?;
            let address = format!("{address:#x}");
            let text = format!(
                "{address} sensitive={} extractable={} always_protected={} value_withheld={}",
                protection.sensitive,
                protection.extractable,
                protection.always_protected,
                protection.value_withheld
            );
            print(
                json,
                &text,
                serde_json::json!({
                    "address": address,
                    "sensitive": protection.sensitive,
                    "extractable": protection.extractable,
                    "always_protected": protection.always_protected,
                    "value_withheld": protection.value_withheld,
                }),
            );
        }
    }
    Ok(())
}
