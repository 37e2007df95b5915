//! Every queue claim stays within one tenant (docs/distribution.md, "Queue claims"): a statement
//! that locks rows (`FOR UPDATE`, `FOR SHARE`, `SKIP LOCKED`, ...) anywhere in the crates' and
//! services' SQL must filter by a tenant parameter (`tenant_id = $n` or `tenant_id = ANY ($n)`),
//! so that a tenant-distributed deployment routes it to one shard. A claim across tenants
//! becomes "pick the tenants with due work, then claim within a tenant" (the inbox's
//! `claim_work`); the broadcaster's queue reads without locks, fairly across tenants.

use std::path::{Path, PathBuf};

/// Clauses that lock the rows a statement reads.
const ROW_LOCKS: [&str; 5] = [
    "for update",
    "for no key update",
    "for share",
    "for key share",
    "skip locked",
];

/// One SQL statement found in the sources: where, and its text with whitespace collapsed.
#[derive(Debug)]
struct Statement {
    place: String,
    text: String,
}

/// The string literals of Rust source `src`, each with its line and the code before it (since
/// the previous literal). Comments, character literals and lifetimes are not literals.
fn literals(src: &str) -> Vec<(usize, String, String)> {
    let chars: Vec<char> = src.chars().collect();
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let mut out = Vec::new();
    let (mut i, mut line, mut gap) = (0, 1, String::new());
    while i < chars.len() {
        let c = chars[i];
        let ident_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            gap.push_str("//");
            continue;
        }
        if c == '/' && at(i + 1) == '*' {
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && at(i + 1) == '/') {
                line += usize::from(chars[i] == '\n');
                i += 1;
            }
            i += 2;
            gap.push_str("/**/");
            continue;
        }
        // Raw strings: r"..", r#".."#, br"..".
        let raw_start = if !ident_before && c == 'r' {
            Some(i + 1)
        } else if !ident_before && c == 'b' && at(i + 1) == 'r' {
            Some(i + 2)
        } else {
            None
        };
        if let Some(mut j) = raw_start {
            let mut hashes = 0;
            while at(j) == '#' {
                hashes += 1;
                j += 1;
            }
            if at(j) == '"' {
                let start_line = line;
                let close: Vec<char> = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                let mut text = String::new();
                j += 1;
                while j < chars.len() && !chars[j..].starts_with(&close) {
                    line += usize::from(chars[j] == '\n');
                    text.push(chars[j]);
                    j += 1;
                }
                out.push((start_line, std::mem::take(&mut gap), text));
                i = j + close.len();
                continue;
            }
        }
        if c == '"' || (!ident_before && c == 'b' && at(i + 1) == '"') {
            let start_line = line;
            let mut j = if c == '"' { i + 1 } else { i + 2 };
            let mut text = String::new();
            while j < chars.len() && chars[j] != '"' {
                if chars[j] == '\\' {
                    match at(j + 1) {
                        '\n' => {
                            // A continued line: the newline and the next line's indentation go.
                            line += 1;
                            j += 2;
                            while at(j) == ' ' || at(j) == '\t' {
                                j += 1;
                            }
                            text.push(' ');
                            continue;
                        }
                        'n' | 't' | 'r' => text.push(' '),
                        other => text.push(other),
                    }
                    j += 2;
                    continue;
                }
                line += usize::from(chars[j] == '\n');
                text.push(chars[j]);
                j += 1;
            }
            out.push((start_line, std::mem::take(&mut gap), text));
            i = j + 1;
            continue;
        }
        if c == '\'' {
            // A character literal ('x', '\n', '\u{..}') is skipped; a lifetime is code.
            if at(i + 1) == '\\' {
                let mut j = i + 2;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                continue;
            }
            if at(i + 2) == '\'' {
                i += 3;
                continue;
            }
        }
        line += usize::from(c == '\n');
        gap.push(c);
        i += 1;
    }
    out
}

/// The SQL statements of Rust source: literals joined when only `concat!(`-like code (macro
/// names, parentheses, commas, white space) stands between them.
fn rust_statements(path: &str, src: &str) -> Vec<Statement> {
    let joins = |gap: &str| {
        gap.chars().all(|c| {
            c.is_whitespace() || c.is_alphanumeric() || matches!(c, '_' | '!' | '(' | ')' | ',')
        })
    };
    let mut out: Vec<Statement> = Vec::new();
    for (line, gap, text) in literals(src) {
        match out.last_mut() {
            Some(last) if joins(&gap) => {
                last.text.push(' ');
                last.text.push_str(&text);
            }
            _ => out.push(Statement {
                place: format!("{path}:{line}"),
                text,
            }),
        }
    }
    for s in &mut out {
        s.text = s.text.split_whitespace().collect::<Vec<_>>().join(" ");
    }
    out
}

/// The statements of a migration: `--` comments dropped, split at semicolons (a function body's
/// statements come out one by one).
fn sql_statements(path: &str, src: &str) -> Vec<Statement> {
    let code: String = src
        .lines()
        .map(|l| l.split("--").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    code.split(';')
        .map(|s| Statement {
            place: path.to_owned(),
            text: s.split_whitespace().collect::<Vec<_>>().join(" "),
        })
        .collect()
}

/// True when the statement compares tenant_id with a parameter: `$n`, `ANY ($n ...)`, or a
/// PL/pgSQL function's `p_...` argument.
fn filters_by_tenant(text: &str) -> bool {
    let lower = text.to_lowercase();
    lower.match_indices("tenant_id").any(|(at, word)| {
        let rest = lower[at + word.len()..].trim_start();
        let Some(rest) = rest.strip_prefix('=') else {
            return false;
        };
        let mut rest = rest.trim_start();
        if let Some(any) = rest.strip_prefix("any") {
            match any.trim_start().strip_prefix('(') {
                Some(inner) => rest = inner.trim_start(),
                None => return false,
            }
        }
        let parameter = rest
            .strip_prefix('$')
            .is_some_and(|n| n.starts_with(|c: char| c.is_ascii_digit()));
        // A trigger filters by the tenant of the row being written (`NEW.tenant_id`).
        parameter || rest.starts_with("p_") || rest.starts_with("new.tenant_id")
    })
}

fn locks_rows(text: &str) -> bool {
    let lower = text.to_lowercase();
    ROW_LOCKS.iter().any(|l| lower.contains(l))
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            files_under(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs" || e == "sql") {
            out.push(path);
        }
    }
    Ok(())
}

/// Every statement of every crate's and service's sources and of the migrations.
fn all_statements() -> anyhow::Result<Vec<Statement>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for group in ["crates", "services"] {
        for member in std::fs::read_dir(root.join(group))? {
            let member = member?.path();
            for sub in ["src", "migrations"] {
                if member.join(sub).is_dir() {
                    files_under(&member.join(sub), &mut files)?;
                }
            }
        }
    }
    let mut out = Vec::new();
    for file in files {
        let src = std::fs::read_to_string(&file)?;
        let name = file
            .strip_prefix(&root)
            .unwrap_or(&file)
            .display()
            .to_string();
        if name.ends_with(".sql") {
            out.extend(sql_statements(&name, &src));
        } else {
            out.extend(rust_statements(&name, &src));
        }
    }
    Ok(out)
}

#[test]
fn every_queue_claim_and_row_lock_filters_by_tenant() -> anyhow::Result<()> {
    let statements = all_statements()?;
    let locking: Vec<&Statement> = statements.iter().filter(|s| locks_rows(&s.text)).collect();
    let across: Vec<String> = locking
        .iter()
        .filter(|s| !filters_by_tenant(&s.text))
        .map(|s| {
            format!(
                "{}: locks rows without filtering by a tenant parameter: {}",
                s.place, s.text
            )
        })
        .collect();
    assert!(
        across.is_empty(),
        "{} row-locking statements span tenants:\n{}",
        across.len(),
        across.join("\n")
    );
    println!(
        "{} statements read, {} lock rows, all within a tenant",
        statements.len(),
        locking.len()
    );
    // The inbox's claim is among them: the scan reads what it must.
    assert!(
        locking
            .iter()
            .any(|s| s.place.starts_with("crates/store/src/inbox.rs")
                && s.text.contains("SKIP LOCKED")),
        "the inbox's claim was not found"
    );
    Ok(())
}

#[test]
fn the_scan_tells_a_claim_within_a_tenant_from_one_across_tenants() {
    let src = r#"
        // A comment: SELECT 1 FOR UPDATE SKIP LOCKED (not SQL).
        const C: char = '"';
        fn across<'a>(x: &'a str) {
            sqlx::query_as(
                "SELECT w.inbox_id FROM inbox_work w JOIN inbox_events e ON e.inbox_id = w.inbox_id \
                 WHERE w.status = 'PENDING' AND w.due_at <= now() \
                 ORDER BY w.due_at LIMIT 1 FOR UPDATE OF w SKIP LOCKED",
            );
            sqlx::query(concat!(
                "SELECT 1 FROM withdrawal_ops o WHERE o.tenant_id = ",
                "$1 AND o.op_id = $2 ",
                lock!(),
                " FOR UPDATE OF o"
            ));
            sqlx::query("SELECT 1 FROM inbox_work WHERE tenant_id = ANY ($1::uuid[]) FOR SHARE");
            sqlx::query(r"SELECT 1 FROM inbox_work w, tenants t WHERE w.tenant_id = t.tenant_id FOR UPDATE");
        }
    "#;
    let statements = rust_statements("x.rs", src);
    let locking: Vec<(&str, bool)> = statements
        .iter()
        .filter(|s| locks_rows(&s.text))
        .map(|s| (s.place.as_str(), filters_by_tenant(&s.text)))
        .collect();
    assert_eq!(
        locking,
        [
            ("x.rs:6", false),
            ("x.rs:11", true),
            ("x.rs:16", true),
            ("x.rs:17", false)
        ],
        "{statements:#?}"
    );
    let sql = "-- FOR UPDATE in a comment\nCREATE FUNCTION f() AS $$ BEGIN \
               PERFORM 1 FROM ledger_holds WHERE tenant_id = p_tenant FOR UPDATE; \
               PERFORM 1 FROM ledger_holds FOR UPDATE; END $$;";
    let found: Vec<bool> = sql_statements("m.sql", sql)
        .iter()
        .filter(|s| locks_rows(&s.text))
        .map(|s| filters_by_tenant(&s.text))
        .collect();
    assert_eq!(found, [true, false]);
}
