//! A SoftHSM2 token per test. `scripts/test.sh` installs SoftHSM2 (`scripts/hsm.sh`), exports
//! `SOFTHSM2_CONF` (a token directory of the run's own, under `.data/test-hsm`) and the module's
//! path as `OPLEDGER_PKCS11_MODULE`; every test process and the services it starts inherit both.
//! Each [`TestToken`] is a new token in that directory, with a label of its own and a random user
//! PIN in a file, so tests running at once never share a token.

use anyhow::{Context, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The variable naming the PKCS#11 module (`scripts/test.sh` exports it).
pub const PKCS11_MODULE_ENV: &str = "OPLEDGER_PKCS11_MODULE";

/// A new, initialised SoftHSM2 token of this test.
#[derive(Debug)]
pub struct TestToken {
    /// The PKCS#11 module.
    pub module: PathBuf,
    /// The token's label.
    pub label: String,
    /// The file holding its user PIN.
    pub pin_file: PathBuf,
    dir: PathBuf,
}

impl TestToken {
    /// Initialises a new token (a fresh label and PIN) in `$SOFTHSM2_CONF`'s token directory.
    pub fn create() -> anyhow::Result<TestToken> {
        let module = PathBuf::from(
            std::env::var(PKCS11_MODULE_ENV)
                .with_context(|| format!("{PKCS11_MODULE_ENV} is not set: run scripts/test.sh"))?,
        );
        let conf = std::env::var("SOFTHSM2_CONF")
            .context("SOFTHSM2_CONF is not set: run scripts/test.sh")?;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let label = format!("opl-{}", &id[..12]);
        // Beside the token directory, so that the run's clean-up removes it too.
        let dir = Path::new(&conf)
            .parent()
            .map_or_else(std::env::temp_dir, Path::to_path_buf)
            .join("pins")
            .join(&id);
        std::fs::create_dir_all(&dir)?;
        let pin_file = dir.join("pin");
        std::fs::write(&pin_file, format!("{}\n", &id[12..]))?;
        // One initialisation at a time: softhsm2-util picks "the first free slot" of the
        // directory, which two processes could both pick.
        let lock = std::fs::File::create(Path::new(&conf).with_extension("lock"))?;
        lock.lock()?;
        let out = Command::new("bash")
            .arg(crate::ha::repo_root().join("scripts/hsm.sh"))
            .arg("init-token")
            .arg(&label)
            .arg(&pin_file)
            .output()
            .context("running scripts/hsm.sh init-token")?;
        drop(lock);
        if !out.status.success() {
            bail!(
                "hsm.sh init-token failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(TestToken {
            module,
            label,
            pin_file,
            dir,
        })
    }
}

impl TestToken {
    /// Puts the known test key `secret` into this token as a key pair labelled `label` (private
    /// half sensitive and not extractable from then on), for the signer suites run with their
    /// usual wallets held in a token (`OPLEDGER_TEST_KEY_BACKEND=pkcs11`). Tests only: a
    /// production key is generated inside its token (`opledger_hsm::generate`), never imported.
    pub fn import(&self, label: &str, secret: &zeroize::Zeroizing<[u8; 32]>) -> anyhow::Result<()> {
        use cryptoki::object::{Attribute, KeyType, ObjectClass};
        let session = self.session()?;
        let key = k256::ecdsa::SigningKey::from_slice(secret.as_slice())?;
        let point = key.verifying_key().to_encoded_point(false);
        let mut wrapped = vec![0x04, 0x41];
        wrapped.extend_from_slice(point.as_bytes());
        let id = uuid::Uuid::new_v4().as_bytes().to_vec();
        let common = |class| {
            vec![
                Attribute::Class(class),
                Attribute::KeyType(KeyType::EC),
                Attribute::Token(true),
                Attribute::Label(label.as_bytes().to_vec()),
                Attribute::Id(id.clone()),
                Attribute::EcParams(opledger_hsm::SECP256K1_PARAMS.to_vec()),
            ]
        };
        let mut private = common(ObjectClass::PRIVATE_KEY);
        private.extend([
            Attribute::Private(true),
            Attribute::Sensitive(true),
            Attribute::Extractable(false),
            Attribute::Sign(true),
            Attribute::Value(secret.to_vec()),
        ]);
        let mut public = common(ObjectClass::PUBLIC_KEY);
        public.extend([
            Attribute::Private(false),
            Attribute::Verify(true),
            Attribute::EcPoint(wrapped),
        ]);
        session.create_object(&private)?;
        session.create_object(&public)?;
        Ok(())
    }

    /// A read-write session on this token, logged in as its user, through the module directly
    /// (not the code under test).
    pub fn session(&self) -> anyhow::Result<cryptoki::session::Session> {
        use cryptoki::session::UserType;
        let pkcs11 = opledger_hsm::module(&self.module)?;
        let slot = pkcs11
            .get_slots_with_token()?
            .into_iter()
            .find(|s| {
                pkcs11
                    .get_token_info(*s)
                    .is_ok_and(|i| i.label() == self.label)
            })
            .context("the test token is gone")?;
        let session = pkcs11.open_rw_session(slot)?;
        let pin = std::fs::read_to_string(&self.pin_file)?;
        match session.login(
            UserType::User,
            Some(&cryptoki::types::AuthPin::new(pin.trim().into())),
        ) {
            Ok(())
            | Err(cryptoki::error::Error::Pkcs11(
                cryptoki::error::RvError::UserAlreadyLoggedIn,
                _,
            )) => {}
            Err(e) => return Err(e.into()),
        }
        Ok(session)
    }

    /// Where the key labelled `label` in this token is (a software token: allowed).
    pub fn location(&self, label: &str) -> opledger_hsm::KeyLocation {
        opledger_hsm::KeyLocation {
            module: self.module.clone(),
            token_label: self.label.clone(),
            key_label: label.to_owned(),
            pin_file: self.pin_file.clone(),
            allow_software_token: true,
        }
    }
}

impl Drop for TestToken {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
