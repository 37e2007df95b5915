//! Each service reaches the database through its own role's narrow handle only
//! (`opledger_store::roles`): the handle has exactly the calls that service makes, so a service
//! that tried a call of another role's (one its login may not make) would have to name another
//! handle or the whole `Store`, and this test refuses both.

use std::path::{Path, PathBuf};

/// (service directory, its handle, the `Store` accessor that makes it)
const SERVICES: [(&str, &str, &str); 8] = [
    ("operations", "OperationsStore", "operations"),
    ("approvals", "ApprovalsStore", "approvals"),
    ("signer", "SignerStore", "signer"),
    ("broadcaster", "BroadcasterStore", "broadcaster"),
    ("reconciler", "ReconcilerStore", "reconciler"),
    ("inbox", "InboxStore", "inbox"),
    ("witness", "WitnessStore", "witness"),
    ("custodian", "CustodianStore", "custodian"),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// The code of a line: without a `//` comment (a `//` inside a string literal is not expected in
/// the lines this test looks at).
fn code(line: &str) -> &str {
    line.split("//").next().unwrap_or("")
}

/// Whether `code` has `word` not followed by an identifier character (`Store`, not `StoreError`).
fn contains_word(code: &str, word: &str) -> bool {
    code.match_indices(word).any(|(at, _)| {
        !code[at + word.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
    })
}

/// What in `source` (one file of `service`) reaches the store other than through `handle`.
fn violations(source: &str, service: &str, accessor: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line) in source.lines().enumerate() {
        let code = code(line);
        let mut refuse = |why: &str| found.push(format!("line {}: {why}: {}", n + 1, line.trim()));
        for (other, other_handle, other_accessor) in SERVICES {
            if other != service && code.contains(other_handle) {
                refuse(&format!("names the {other} service's handle"));
            }
            if other != service && code.contains(&format!(".store().{other_accessor}()")) {
                refuse(&format!("takes the {other} service's handle"));
            }
        }
        let whole_store = [
            "opledger_store::Store",
            "Store::connect",
            "Store::from_pool",
        ];
        if whole_store.iter().any(|s| contains_word(code, s))
            || (code.trim_start().starts_with("use opledger_store::{")
                && code.split([',', '{', '}', ' ']).any(|w| w == "Store"))
        {
            refuse("names the whole Store");
        }
        if let Some(rest) = code.split(".store()").nth(1)
            && !rest.starts_with(&format!(".{accessor}()"))
        {
            refuse(&format!(
                "uses the runtime's store other than as `.{accessor}()`"
            ));
        }
    }
    found
}

#[test]
fn each_service_reaches_the_store_only_through_its_own_roles_handle() -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut report = Vec::new();
    for (service, handle, accessor) in SERVICES {
        let mut files = Vec::new();
        rust_files(&root.join("services").join(service).join("src"), &mut files)?;
        assert!(!files.is_empty(), "no sources found for {service}");
        let mut names_own = false;
        for file in files {
            let source = std::fs::read_to_string(&file)?;
            names_own |= source.contains(handle);
            for v in violations(&source, service, accessor) {
                report.push(format!("{}: {v}", file.display()));
            }
        }
        assert!(names_own, "{service} never names its handle {handle}");
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
    Ok(())
}

#[test]
fn the_check_catches_another_roles_handle_and_the_whole_store() {
    let signer = |src: &str| violations(src, "signer", "signer");
    assert!(signer("let s: SignerStore = runtime.store().signer();").is_empty());
    assert_eq!(signer("let s = runtime.store().broadcaster();").len(), 2);
    assert_eq!(signer("fn f(s: BroadcasterStore) {}").len(), 1);
    assert_eq!(signer("use opledger_store::Store;").len(), 1);
    assert_eq!(signer("use opledger_store::{Store, StoreError};").len(), 1);
    assert_eq!(
        signer("let s = Store::connect(url, config).await?;").len(),
        1
    );
    assert!(signer("use opledger_store::{StoreError, roles::SignerStore};").is_empty());
    assert!(signer("use opledger_store::StoreError;").is_empty());
    // A comment is not code.
    assert!(signer("// the broadcaster's BroadcasterStore").is_empty());
}
