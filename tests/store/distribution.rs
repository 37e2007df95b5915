//! Ready for a tenant-distributed engine (issue 14; docs/distribution.md): Citus's multi-tenant
//! model, every tenant table distributed by `tenant_id` and co-located, shared tables replicated
//! to every node. Citus cannot be installed here, so its rules are checked over the catalog of a
//! freshly migrated database: a tenant table has `tenant_id NOT NULL` leading its primary key,
//! every unique constraint and unique index, and every foreign key to another tenant table
//! (co-located); no shared table references a tenant table; every trigger and sequence is listed
//! in docs/distribution.md with what a distributed deployment needs for it. Every violation is
//! reported at once, naming the table and the rule.

use opledger_testkit::TestDatabase;
use sqlx::PgPool;
use std::collections::{BTreeMap, BTreeSet};

/// The shared (reference) tables: replicated to every node, never distributed. Every other table
/// is a tenant table. Each entry says why it cannot be a tenant table.
const SHARED: &[(&str, &str)] = &[
    // The tenant registry itself: its name is unique across the platform (a constraint only a
    // table on every node can hold), every tenant table may reference it, and only the admin
    // CLI writes it.
    (
        "tenants",
        "the tenant registry; its unique name spans tenants",
    ),
    // A request presents a key id before its tenant is known: the key must resolve to its tenant
    // on whichever node takes the request. Written by the admin CLI only; holds a hash, never a
    // secret.
    ("api_keys", "resolves a presented key id to its tenant"),
    // The endpoint id in a webhook's URL is what names the tenant (nothing in a body does): the
    // same look-up before any tenant is known. Written by the admin CLI only.
    (
        "webhook_endpoints",
        "resolves a webhook URL's endpoint to its tenant",
    ),
    // Which tenant account a deposit address belongs to: an address is registered once across
    // tenants (a chain transfer can then credit only one tenant). Written by the admin CLI only.
    (
        "deposit_addresses",
        "an address names one tenant account across tenants",
    ),
    // The verification keys of an endpoint, read with it before the tenant is trusted; a child
    // of webhook_endpoints (shared), written by the admin CLI only.
    (
        "webhook_secrets",
        "an endpoint's keys, read before the tenant is trusted",
    ),
    // The platform's state machine, the same for every tenant, read by the move guard of every
    // state change on every node; immutable.
    (
        "opledger_transition_rules",
        "the transition table, the same for every tenant",
    ),
    // Which actor each service role may act as: platform-wide, read by the same guard; immutable.
    (
        "opledger_role_actors",
        "which actors each service role may act as",
    ),
    // One row per hot wallet (network, sender), not per tenant: a wallet's nonces are handed out
    // by one row whichever tenant a withdrawal belongs to (nothing forbids configuring one wallet
    // for several tenants, and two counters for one sender would sign two transactions with one
    // nonce). Its writes commit on every node: the price of that guarantee.
    (
        "signer_nonces",
        "one nonce counter per hot wallet, whatever the tenant",
    ),
    // One row per network: the block below which the chain watcher no longer re-checks
    // inclusions for reorganizations, written by the one watcher of the network, read by signers
    // deciding whether a retiring wallet may retire.
    (
        "chain_reorg_floors",
        "one reorganization floor per network, whatever the tenant",
    ),
    // One row per network: the random key of the network's watcher lease, written and read only
    // by the broadcaster's lease function (the one watcher among the instances, whatever the
    // tenant).
    (
        "opledger_watch_leases",
        "one watcher lease key per network, whatever the tenant",
    ),
];

/// Tables that are neither: the migrator's own bookkeeping, a plain local table of the node that
/// runs the migrations (the coordinator), never read by a service.
const LOCAL: &[&str] = &["_sqlx_migrations"];

/// One key or foreign key of a table, as the catalog has it.
#[derive(Debug, Clone)]
struct Key {
    table: String,
    name: String,
    /// `primary key`, `unique constraint`, `unique index` or `foreign key`.
    kind: &'static str,
    columns: Vec<String>,
    /// A foreign key's referenced table and columns.
    references: Option<(String, Vec<String>)>,
}

/// What the rules read from the catalog.
#[derive(Debug, Default)]
struct Catalog {
    /// Every table of the schema, with its `tenant_id` column: None when it has none, else
    /// whether it is NOT NULL.
    tables: BTreeMap<String, Option<bool>>,
    keys: Vec<Key>,
    /// (table, trigger).
    triggers: BTreeSet<(String, String)>,
    /// sequence -> `table.column` it serves (empty when it serves none).
    sequences: BTreeMap<String, String>,
}

async fn catalog(pool: &PgPool) -> anyhow::Result<Catalog> {
    let mut catalog = Catalog::default();
    let tables: Vec<(String, Option<bool>)> = sqlx::query_as(
        "SELECT c.relname::text, a.attnotnull FROM pg_class c \
         LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id' \
           AND NOT a.attisdropped \
         WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')",
    )
    .fetch_all(pool)
    .await?;
    catalog.tables = tables
        .into_iter()
        .filter(|(t, _)| !LOCAL.contains(&t.as_str()))
        .collect();

    // Constraints, their columns in key order, and a foreign key's referenced columns.
    type ConstraintRow = (
        String,
        String,
        String,
        Vec<String>,
        Option<String>,
        Vec<String>,
    );
    let constraints: Vec<ConstraintRow> = sqlx::query_as(
        "SELECT c.conrelid::regclass::text, c.conname::text, c.contype::text, \
               ARRAY(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY k(n, i) \
                     JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n \
                     ORDER BY k.i), \
               CASE WHEN c.contype = 'f' THEN c.confrelid::regclass::text END, \
               ARRAY(SELECT a.attname::text FROM unnest(c.confkey) WITH ORDINALITY k(n, i) \
                     JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n \
                     ORDER BY k.i) \
             FROM pg_constraint c \
             WHERE c.connamespace = 'public'::regnamespace AND c.contype IN ('p', 'u', 'f')",
    )
    .fetch_all(pool)
    .await?;
    for (table, name, kind, columns, referenced, referenced_columns) in constraints {
        catalog.keys.push(Key {
            table,
            name,
            kind: match kind.as_str() {
                "p" => "primary key",
                "u" => "unique constraint",
                _ => "foreign key",
            },
            columns,
            references: referenced.map(|r| (r, referenced_columns)),
        });
    }

    // Unique indexes that back no constraint (partial ones included); an expression counts as
    // a column that is not tenant_id.
    let indexes: Vec<(String, String, Vec<String>)> = sqlx::query_as(
        "SELECT t.relname::text, x.relname::text, \
           ARRAY(SELECT coalesce(a.attname::text, '(expression)') \
                 FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(n, o) \
                 LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n \
                 WHERE k.o <= i.indnkeyatts ORDER BY k.o) \
         FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid JOIN pg_class x ON x.oid = i.indexrelid \
         WHERE t.relnamespace = 'public'::regnamespace AND i.indisunique \
           AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)",
    )
    .fetch_all(pool)
    .await?;
    for (table, name, columns) in indexes {
        catalog.keys.push(Key {
            table,
            name,
            kind: "unique index",
            columns,
            references: None,
        });
    }

    let triggers: Vec<(String, String)> = sqlx::query_as(
        "SELECT c.relname::text, t.tgname::text FROM pg_trigger t \
         JOIN pg_class c ON c.oid = t.tgrelid \
         WHERE c.relnamespace = 'public'::regnamespace AND NOT t.tgisinternal",
    )
    .fetch_all(pool)
    .await?;
    catalog.triggers = triggers.into_iter().collect();

    // Sequences and the column each serves (identity: 'i', serial: 'a').
    let sequences: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT s.relname::text, \
           (SELECT t.relname || '.' || a.attname FROM pg_depend d \
              JOIN pg_class t ON t.oid = d.refobjid \
              JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid \
            WHERE d.classid = 'pg_class'::regclass AND d.objid = s.oid \
              AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('i', 'a') LIMIT 1) \
         FROM pg_class s WHERE s.relnamespace = 'public'::regnamespace AND s.relkind = 'S'",
    )
    .fetch_all(pool)
    .await?;
    catalog.sequences = sequences
        .into_iter()
        .map(|(s, column)| (s, column.unwrap_or_default()))
        .collect();
    Ok(catalog)
}

/// Every table breaking a distribution rule, as "table: rule" lines.
fn table_violations(catalog: &Catalog, shared: &BTreeSet<&str>) -> Vec<String> {
    let mut out = Vec::new();
    for name in shared {
        if !catalog.tables.contains_key(*name) {
            out.push(format!(
                "{name}: listed as shared, but no such table exists"
            ));
        }
    }
    let is_tenant = |t: &str| catalog.tables.contains_key(t) && !shared.contains(t);
    for (table, tenant_id) in &catalog.tables {
        if !is_tenant(table) {
            continue;
        }
        match tenant_id {
            None => out.push(format!(
                "{table}: tenant table without a tenant_id column (not in the shared list)"
            )),
            Some(false) => out.push(format!("{table}: tenant_id is nullable")),
            Some(true) => {}
        }
        if !catalog
            .keys
            .iter()
            .any(|k| &k.table == table && k.kind == "primary key")
        {
            out.push(format!("{table}: tenant table without a primary key"));
        }
    }
    let cols = |c: &[String]| c.join(", ");
    for key in catalog
        .keys
        .iter()
        .filter(|k| catalog.tables.contains_key(&k.table))
    {
        let table = key.table.as_str();
        let leads = key.columns.first().map(String::as_str) == Some("tenant_id");
        match &key.references {
            None if is_tenant(table) && !leads => out.push(format!(
                "{table}: {} {} ({}) does not lead with tenant_id",
                key.kind,
                key.name,
                cols(&key.columns)
            )),
            None => {}
            Some((referenced, referenced_columns)) => {
                let co_located =
                    leads && referenced_columns.first().map(String::as_str) == Some("tenant_id");
                if is_tenant(table) && is_tenant(referenced) && !co_located {
                    out.push(format!(
                        "{table}: foreign key {} ({}) -> {referenced} ({}) is not co-located \
                         (tenant_id first on both sides)",
                        key.name,
                        cols(&key.columns),
                        cols(referenced_columns)
                    ));
                }
                if !is_tenant(table) && is_tenant(referenced) {
                    out.push(format!(
                        "{table}: shared table with foreign key {} to tenant table {referenced}",
                        key.name
                    ));
                }
            }
        }
    }
    out
}

/// The rows of the markdown table under `heading` in `doc`: each row's cells, backticks removed,
/// header and separator rows left out.
fn doc_rows(doc: &str, heading: &str) -> Vec<Vec<String>> {
    let Some(start) = doc.lines().position(|l| l.trim() == heading) else {
        return Vec::new();
    };
    doc.lines()
        .skip(start + 1)
        .take_while(|l| !l.starts_with("## "))
        .filter(|l| l.trim_start().starts_with('|'))
        .map(|l| {
            l.trim()
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().replace('`', ""))
                .collect::<Vec<_>>()
        })
        .skip(2)
        .collect()
}

/// A note that says something: at least four words.
fn is_note(cell: Option<&String>) -> bool {
    cell.is_some_and(|c| c.split_whitespace().count() >= 4)
}

/// Triggers and sequences the doc does not list (or lists without a note), and ones it lists
/// that no longer exist; and the shared tables it names against `shared`.
fn doc_violations(catalog: &Catalog, shared: &BTreeSet<&str>, doc: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut listed = BTreeSet::new();
    for row in doc_rows(doc, "## Triggers") {
        let (Some(table), Some(trigger)) = (row.first(), row.get(1)) else {
            continue;
        };
        let key = (table.clone(), trigger.clone());
        if !catalog.triggers.contains(&key) {
            out.push(format!(
                "{table}: docs/distribution.md lists trigger {trigger}, which no longer exists"
            ));
        } else if !is_note(row.get(3)) {
            out.push(format!(
                "{table}: trigger {trigger} has no note of what a distributed deployment needs"
            ));
        }
        listed.insert(key);
    }
    for (table, trigger) in catalog.triggers.difference(&listed) {
        out.push(format!(
            "{table}: trigger {trigger} is not listed in docs/distribution.md"
        ));
    }
    let mut listed = BTreeMap::new();
    for row in doc_rows(doc, "## Sequences") {
        let (Some(sequence), Some(column)) = (row.first(), row.get(1)) else {
            continue;
        };
        match catalog.sequences.get(sequence) {
            None => out.push(format!(
                "{column}: docs/distribution.md lists sequence {sequence}, which no longer exists"
            )),
            Some(serves) if serves != column => out.push(format!(
                "{serves}: sequence {sequence} is listed for {column}"
            )),
            Some(_) if !is_note(row.get(2)) => out.push(format!(
                "{column}: sequence {sequence} has no note of what a distributed deployment needs"
            )),
            Some(_) => {}
        }
        listed.insert(sequence.clone(), column.clone());
    }
    for (sequence, column) in &catalog.sequences {
        if !listed.contains_key(sequence) {
            out.push(format!(
                "{column}: sequence {sequence} is not listed in docs/distribution.md"
            ));
        }
    }
    let documented: BTreeSet<String> = doc_rows(doc, "## Shared tables")
        .into_iter()
        .filter_map(|row| row.into_iter().next())
        .collect();
    let expected: BTreeSet<String> = shared.iter().map(|s| (*s).to_owned()).collect();
    for table in expected.symmetric_difference(&documented) {
        out.push(format!(
            "{table}: the shared tables of docs/distribution.md and of this test differ"
        ));
    }
    out
}

fn doc() -> anyhow::Result<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/distribution.md");
    Ok(std::fs::read_to_string(path)?)
}

fn shared() -> BTreeSet<&'static str> {
    SHARED.iter().map(|(t, _)| *t).collect()
}

#[tokio::test]
async fn every_table_follows_the_distribution_rules_and_every_trigger_and_sequence_is_documented()
-> anyhow::Result<()> {
    let db = TestDatabase::create().await?;
    let catalog = catalog(&db.admin_pool().await?).await?;
    let shared = shared();
    let mut violations = table_violations(&catalog, &shared);
    violations.extend(doc_violations(&catalog, &shared, &doc()?));
    assert!(
        violations.is_empty(),
        "{} distribution rule violations:\n{}",
        violations.len(),
        violations.join("\n")
    );
    let tenant_tables = catalog.tables.len() - shared.len();
    println!(
        "{tenant_tables} tenant tables, {} shared, {} keys, {} triggers, {} sequences checked",
        shared.len(),
        catalog.keys.len(),
        catalog.triggers.len(),
        catalog.sequences.len()
    );
    // The rules looked at something: the tables of the schema and their keys.
    assert!(tenant_tables >= 20 && catalog.keys.len() >= 60);
    Ok(())
}

#[tokio::test]
async fn a_table_breaking_any_rule_is_named_with_the_rule() -> anyhow::Result<()> {
    let db = TestDatabase::create().await?;
    let pool = db.admin_pool().await?;
    for sql in [
        "CREATE TABLE rogue_unscoped (id bigint PRIMARY KEY)",
        "CREATE TABLE rogue_nullable (tenant_id uuid, id bigint, UNIQUE (tenant_id, id))",
        "CREATE TABLE rogue_parent (tenant_id uuid NOT NULL, id bigint NOT NULL, \
           PRIMARY KEY (tenant_id, id), UNIQUE (id))",
        "CREATE UNIQUE INDEX rogue_parent_by_id ON rogue_parent (id) WHERE id > 0",
        "CREATE TABLE rogue_child (tenant_id uuid NOT NULL, \
           n bigint GENERATED ALWAYS AS IDENTITY, parent bigint NOT NULL REFERENCES rogue_parent (id), \
           PRIMARY KEY (tenant_id, n))",
        "CREATE TABLE rogue_shared (name text PRIMARY KEY, tenant_id uuid NOT NULL, \
           op_id uuid NOT NULL, FOREIGN KEY (tenant_id, op_id) REFERENCES withdrawal_ops)",
        "CREATE TRIGGER rogue_child_append_only BEFORE UPDATE ON rogue_child \
           FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change()",
    ] {
        sqlx::query(sql).execute(&pool).await?;
    }
    let catalog = catalog(&pool).await?;
    let mut shared = shared();
    shared.insert("rogue_shared");
    shared.insert("rogue_gone");
    let mut found = table_violations(&catalog, &shared);
    found.extend(doc_violations(&catalog, &shared, &doc()?));
    for expected in [
        "rogue_gone: listed as shared, but no such table exists",
        "rogue_unscoped: tenant table without a tenant_id column (not in the shared list)",
        "rogue_unscoped: primary key rogue_unscoped_pkey (id) does not lead with tenant_id",
        "rogue_nullable: tenant_id is nullable",
        "rogue_nullable: tenant table without a primary key",
        "rogue_parent: unique constraint rogue_parent_id_key (id) does not lead with tenant_id",
        "rogue_parent: unique index rogue_parent_by_id (id) does not lead with tenant_id",
        "rogue_child: foreign key rogue_child_parent_fkey (parent) -> rogue_parent (id) is not \
         co-located (tenant_id first on both sides)",
        "rogue_shared: shared table with foreign key rogue_shared_tenant_id_op_id_fkey to tenant \
         table withdrawal_ops",
        "rogue_child: trigger rogue_child_append_only is not listed in docs/distribution.md",
        "rogue_child.n: sequence rogue_child_n_seq is not listed in docs/distribution.md",
        "rogue_gone: the shared tables of docs/distribution.md and of this test differ",
        "rogue_shared: the shared tables of docs/distribution.md and of this test differ",
    ] {
        assert!(
            found.iter().any(|f| f == expected),
            "not reported: {expected}\nreported:\n{}",
            found.join("\n")
        );
    }
    assert_eq!(found.len(), 13, "{}", found.join("\n"));

    // A doc that lists what no longer exists, or lists without a note, fails too.
    let stale = "## Triggers\n\n| table | trigger | function | note |\n|---|---|---|---|\n\
                 | `ledger_entries` | `ledger_entries_gone` | f | a note of four words |\n\
                 | `rogue_child` | `rogue_child_append_only` | f | terse |\n\n\
                 ## Sequences\n\n| sequence | column | note |\n|---|---|---|\n\
                 | `rogue_gone_seq` | `rogue_gone.id` | a note of four words |\n";
    let found = doc_violations(&catalog, &shared, stale);
    for expected in [
        "ledger_entries: docs/distribution.md lists trigger ledger_entries_gone, which no longer \
         exists",
        "rogue_child: trigger rogue_child_append_only has no note of what a distributed \
         deployment needs",
        "rogue_gone.id: docs/distribution.md lists sequence rogue_gone_seq, which no longer exists",
    ] {
        assert!(
            found.iter().any(|f| f == expected),
            "not reported: {expected}\nreported:\n{}",
            found.join("\n")
        );
    }
    db.drop_database().await
}
