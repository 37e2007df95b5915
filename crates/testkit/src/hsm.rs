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
        let dir = std::env::temp_dir().join(format!("opledger-hsm-{id}"));
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

impl Drop for TestToken {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
