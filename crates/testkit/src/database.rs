//! Per-test databases cloned from a migrated template database.

use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, anyhow};
use sha2::{Digest, Sha256};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, Connection, PgConnection, PgPool};
use url::Url;

/// The environment variable holding the URL of the test cluster's maintenance database
/// (`postgres`), as a superuser. `scripts/test.sh` sets it.
pub const TEST_DATABASE_URL_ENV: &str = "OPLEDGER_TEST_DATABASE_URL";

/// Key of the session advisory lock that serialises template creation across test processes.
const TEMPLATE_LOCK_KEY: i64 = 0x6f70_6c65_6467_0001; // "opledg" + 1

/// A service's database role: the group role the migrations create for it and the login role
/// tests connect as (a member of that group only), so every service runs with its own grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceRole {
    /// `opledger_operations`.
    Operations,
    /// `opledger_approvals`.
    Approvals,
    /// `opledger_broadcaster`.
    Broadcaster,
    /// `opledger_reconciler`.
    Reconciler,
    /// `opledger_inbox`.
    Inbox,
    /// `opledger_signer`.
    Signer,
    /// `opledger_witness`.
    Witness,
    /// `opledger_custodian`.
    Custodian,
}

impl ServiceRole {
    /// Every service role.
    pub const ALL: [ServiceRole; 8] = [
        ServiceRole::Operations,
        ServiceRole::Approvals,
        ServiceRole::Broadcaster,
        ServiceRole::Reconciler,
        ServiceRole::Inbox,
        ServiceRole::Signer,
        ServiceRole::Witness,
        ServiceRole::Custodian,
    ];

    /// The group role the migrations create.
    pub fn group(self) -> &'static str {
        match self {
            ServiceRole::Operations => "opledger_operations",
            ServiceRole::Approvals => "opledger_approvals",
            ServiceRole::Broadcaster => "opledger_broadcaster",
            ServiceRole::Reconciler => "opledger_reconciler",
            ServiceRole::Inbox => "opledger_inbox",
            ServiceRole::Signer => "opledger_signer",
            ServiceRole::Witness => "opledger_witness",
            ServiceRole::Custodian => "opledger_custodian",
        }
    }

    /// The test login role, a member of [`ServiceRole::group`] only.
    pub fn login(self) -> String {
        format!("{}_test", self.group())
    }

    fn password(self) -> String {
        format!("{}-test-password", self.group())
    }
}

const POOL_MAX_CONNECTIONS: u32 = 8;
const POOL_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);
const CREATE_ATTEMPTS: u32 = 10;

/// A fresh database of its own for one test, with every migration applied.
///
/// Databases are never dropped automatically: `scripts/test.sh` throws the whole cluster away.
#[derive(Debug, Clone)]
pub struct TestDatabase {
    /// Database name (`opledger_t_<uuid>`).
    pub name: String,
    /// URL of this database as the cluster's superuser (owner of every object).
    pub url: String,
    admin: String,
}

impl TestDatabase {
    /// Creates a new database from the migrated template (making the template first if this
    /// cluster does not have it yet).
    pub async fn create() -> anyhow::Result<TestDatabase> {
        TestDatabase::create_on(admin_url()?).await
    }

    /// Like [`TestDatabase::create`], on the cluster whose superuser URL (of its maintenance
    /// database) is `admin_url` instead of the one [`TEST_DATABASE_URL_ENV`] names: a
    /// highly available topology ([`crate::HaCluster`]), say.
    pub async fn create_in(admin_url: &str) -> anyhow::Result<TestDatabase> {
        let url = Url::parse(admin_url.trim()).context("the cluster's URL is not a valid URL")?;
        TestDatabase::create_on(url).await
    }

    async fn create_on(admin_url: Url) -> anyhow::Result<TestDatabase> {
        let template = template_name();

        let mut conn = PgConnection::connect(admin_url.as_str())
            .await
            .with_context(|| {
                format!("connecting to the test cluster at {admin_url} ({TEST_DATABASE_URL_ENV})")
            })?;

        with_template_lock(&mut conn, &admin_url, &template).await?;

        let name = format!("opledger_t_{}", uuid::Uuid::new_v4().simple());
        create_from_template(&mut conn, &name, &template).await?;
        conn.close().await.ok();

        Ok(TestDatabase {
            url: database_url(&admin_url, &name),
            admin: admin_url.to_string(),
            name,
        })
    }

    /// A small pool (at most 8 connections) on this database as the superuser.
    pub async fn admin_pool(&self) -> anyhow::Result<PgPool> {
        pool(&self.url)
            .await
            .with_context(|| format!("connecting to test database {} as superuser", self.name))
    }

    /// URL of this database as `role`'s test login (a member of that service's group role
    /// only): what a service under test uses, so that its own grants are exercised.
    pub fn url_as(&self, role: ServiceRole) -> String {
        let admin = Url::parse(&self.admin).ok();
        admin
            .and_then(|admin| login_url(&admin, &self.name, &role.login(), &role.password()).ok())
            .unwrap_or_default()
    }

    /// A small pool (at most 8 connections) on this database as `role`'s test login.
    pub async fn pool_as(&self, role: ServiceRole) -> anyhow::Result<PgPool> {
        pool(&self.url_as(role)).await.with_context(|| {
            format!(
                "connecting to test database {} as {}",
                self.name,
                role.login()
            )
        })
    }

    /// Drops this database (for tests that create many); every connection to it is closed.
    pub async fn drop_database(self) -> anyhow::Result<()> {
        let admin_url = Url::parse(&self.admin).context("the cluster's URL")?;
        let mut conn = PgConnection::connect(admin_url.as_str())
            .await
            .with_context(|| format!("connecting to the test cluster at {admin_url}"))?;
        sqlx::raw_sql(AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            quote_ident(&self.name)
        )))
        .execute(&mut conn)
        .await
        .with_context(|| format!("dropping test database {}", self.name))?;
        conn.close().await.ok();
        Ok(())
    }
}

/// Name of the template database for the migrations compiled into `opledger-store`:
/// `opledger_tpl_` and the first 16 hex digits of a SHA-256 over every migration's version and
/// checksum, so that a changed migration gets a template of its own.
pub fn template_name() -> String {
    let mut hasher = Sha256::new();
    for migration in opledger_store::MIGRATOR.iter() {
        hasher.update(migration.version.to_be_bytes());
        hasher.update((migration.checksum.len() as u64).to_be_bytes());
        hasher.update(&migration.checksum[..]);
    }
    let digest = hex::encode(hasher.finalize());
    format!("opledger_tpl_{}", &digest[..16])
}

fn admin_url() -> anyhow::Result<Url> {
    let raw = std::env::var(TEST_DATABASE_URL_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .ok_or_else(|| {
            anyhow!(
                "{TEST_DATABASE_URL_ENV} is not set: run scripts/test.sh, which provisions a \
                 throwaway PostgreSQL cluster"
            )
        })?;
    let url = Url::parse(raw.trim())
        .with_context(|| format!("{TEST_DATABASE_URL_ENV} is not a valid URL: {raw}"))?;
    Ok(url)
}

/// The admin URL pointing at database `name` (user, password and parameters kept).
fn database_url(admin: &Url, name: &str) -> String {
    let mut url = admin.clone();
    url.set_path(&format!("/{name}"));
    url.to_string()
}

/// `postgres://LOGIN:PASSWORD@HOST:PORT/<name>`, host and port from the admin URL.
fn login_url(admin: &Url, name: &str, login: &str, password: &str) -> anyhow::Result<String> {
    let options = PgConnectOptions::from_str(admin.as_str())
        .with_context(|| format!("parsing {TEST_DATABASE_URL_ENV} ({admin})"))?;
    let host = options.get_host();
    let port = options.get_port();
    let url = if host.starts_with('/') {
        // A unix socket folder.
        let mut url = Url::parse(&format!(
            "postgres://{login}:{password}@localhost:{port}/{name}"
        ))?;
        url.query_pairs_mut().append_pair("host", host);
        url.to_string()
    } else if host.contains(':') && !host.starts_with('[') {
        format!("postgres://{login}:{password}@[{host}]:{port}/{name}")
    } else {
        format!("postgres://{login}:{password}@{host}:{port}/{name}")
    };
    Ok(url)
}

async fn pool(url: &str) -> Result<PgPool, sqlx::Error> {
    PgPoolOptions::new()
        .max_connections(POOL_MAX_CONNECTIONS)
        .acquire_timeout(POOL_ACQUIRE_TIMEOUT)
        .connect(url)
        .await
}

fn quote_ident(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

/// Runs [`ensure_template_and_roles`] under the cluster-wide advisory lock, so that concurrent
/// test processes build the template once.
async fn with_template_lock(
    conn: &mut PgConnection,
    admin_url: &Url,
    template: &str,
) -> anyhow::Result<()> {
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(TEMPLATE_LOCK_KEY)
        .execute(&mut *conn)
        .await
        .context("taking the template advisory lock")?;
    let result = ensure_template_and_roles(conn, admin_url, template).await;
    // The lock is a session lock: closing the connection would release it as well.
    let unlocked = sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(TEMPLATE_LOCK_KEY)
        .execute(&mut *conn)
        .await
        .context("releasing the template advisory lock");
    result?;
    unlocked?;
    Ok(())
}

async fn ensure_template_and_roles(
    conn: &mut PgConnection,
    admin_url: &Url,
    template: &str,
) -> anyhow::Result<()> {
    let state: Option<bool> =
        sqlx::query_scalar("SELECT datistemplate FROM pg_database WHERE datname = $1")
            .bind(template)
            .fetch_optional(&mut *conn)
            .await
            .context("looking up the template database")?;

    if state != Some(true) {
        if state.is_some() {
            // Left half-made by a process that died while building it.
            tracing::warn!(template, "dropping a half-made template database");
            sqlx::raw_sql(AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                quote_ident(template)
            )))
            .execute(&mut *conn)
            .await
            .with_context(|| format!("dropping the half-made template database {template}"))?;
        }
        build_template(conn, admin_url, template).await?;
    }

    ensure_login_roles(conn).await
}

async fn build_template(
    conn: &mut PgConnection,
    admin_url: &Url,
    template: &str,
) -> anyhow::Result<()> {
    sqlx::raw_sql(AssertSqlSafe(format!(
        "CREATE DATABASE {}",
        quote_ident(template)
    )))
    .execute(&mut *conn)
    .await
    .with_context(|| format!("creating the template database {template}"))?;

    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(POOL_ACQUIRE_TIMEOUT)
        .connect(&database_url(admin_url, template))
        .await
        .with_context(|| format!("connecting to the template database {template}"))?;
    let migrated = opledger_store::MIGRATOR.run(&pool).await;
    pool.close().await;
    migrated.with_context(|| {
        format!("applying the opledger-store migrations to the template database {template}")
    })?;

    // Marked ready last: a template that is not `datistemplate` is a half-made one.
    sqlx::raw_sql(AssertSqlSafe(format!(
        "ALTER DATABASE {} WITH is_template true",
        quote_ident(template)
    )))
    .execute(&mut *conn)
    .await
    .with_context(|| format!("marking {template} as a template"))?;
    Ok(())
}

/// Creates each service's test login role, once the migrations made its group role (the caller
/// holds the template lock, so no other test process creates them concurrently).
async fn ensure_login_roles(conn: &mut PgConnection) -> anyhow::Result<()> {
    for role in ServiceRole::ALL {
        let group_exists: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)")
                .bind(role.group())
                .fetch_one(&mut *conn)
                .await
                .with_context(|| format!("looking up the {} role", role.group()))?;
        if !group_exists {
            continue;
        }
        let login_exists: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)")
                .bind(role.login())
                .fetch_one(&mut *conn)
                .await
                .with_context(|| format!("looking up the {} role", role.login()))?;
        if !login_exists {
            sqlx::raw_sql(AssertSqlSafe(format!(
                "CREATE ROLE {} LOGIN PASSWORD '{}' IN ROLE {}",
                quote_ident(&role.login()),
                role.password(),
                quote_ident(role.group())
            )))
            .execute(&mut *conn)
            .await
            .with_context(|| format!("creating the {} role", role.login()))?;
        }
    }
    Ok(())
}

/// `CREATE DATABASE name TEMPLATE template`, retried while another session still uses the
/// template (a backend of the migration pool that has not exited yet, say).
async fn create_from_template(
    conn: &mut PgConnection,
    name: &str,
    template: &str,
) -> anyhow::Result<()> {
    let sql = format!(
        "CREATE DATABASE {} TEMPLATE {}",
        quote_ident(name),
        quote_ident(template)
    );
    let mut attempt = 1;
    loop {
        match sqlx::raw_sql(AssertSqlSafe(sql.clone()))
            .execute(&mut *conn)
            .await
        {
            Ok(_) => return Ok(()),
            Err(e) if attempt < CREATE_ATTEMPTS && is_template_in_use(&e) => {
                tracing::debug!(template, attempt, "template in use, retrying: {e}");
                tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt))).await;
                attempt += 1;
            }
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("creating test database {name} from template {template}")
                });
            }
        }
    }
}

fn is_template_in_use(error: &sqlx::Error) -> bool {
    match error.as_database_error() {
        // 55006 object_in_use: "source database ... is being accessed by other users".
        Some(db) => {
            db.code().as_deref() == Some("55006")
                || db.message().contains("is being accessed by other users")
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn has_migrations_table(pool: &PgPool) -> anyhow::Result<bool> {
        Ok(
            sqlx::query_scalar("SELECT to_regclass('public._sqlx_migrations') IS NOT NULL")
                .fetch_one(pool)
                .await?,
        )
    }

    #[tokio::test]
    async fn two_databases_are_distinct_and_migrated() -> anyhow::Result<()> {
        let a = TestDatabase::create().await?;
        let b = TestDatabase::create().await?;
        assert_ne!(a.name, b.name);
        assert_ne!(a.url, b.url);

        let expected_migrations = opledger_store::MIGRATOR
            .iter()
            .filter(|m| !m.migration_type.is_down_migration())
            .count();
        for db in [&a, &b] {
            let pool = db.admin_pool().await?;
            let current: String = sqlx::query_scalar("SELECT current_database()")
                .fetch_one(&pool)
                .await?;
            assert_eq!(current, db.name);
            assert!(
                has_migrations_table(&pool).await?,
                "{} has no _sqlx_migrations table",
                db.name
            );
            let applied: i64 =
                sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations WHERE success")
                    .fetch_one(&pool)
                    .await?;
            assert_eq!(usize::try_from(applied)?, expected_migrations);
            pool.close().await;
        }

        // A write in one database is not seen in the other.
        let pool_a = a.admin_pool().await?;
        sqlx::raw_sql("CREATE TABLE testkit_probe (id int)")
            .execute(&pool_a)
            .await?;
        pool_a.close().await;
        let pool_b = b.admin_pool().await?;
        let probe: Option<String> =
            sqlx::query_scalar("SELECT to_regclass('public.testkit_probe')::text")
                .fetch_one(&pool_b)
                .await?;
        assert_eq!(probe, None);
        pool_b.close().await;

        b.drop_database().await?;
        Ok(())
    }

    #[tokio::test]
    async fn each_service_connects_as_its_own_login_role() -> anyhow::Result<()> {
        let db = TestDatabase::create().await?;
        for role in ServiceRole::ALL {
            let pool = db.pool_as(role).await?;
            let (user, in_group): (String, bool) = sqlx::query_as(
                "SELECT current_user::text, pg_has_role(current_user, $1, 'MEMBER')",
            )
            .bind(role.group())
            .fetch_one(&pool)
            .await?;
            assert_eq!(user, role.login());
            assert!(in_group, "{} is in {}", role.login(), role.group());
            pool.close().await;
        }
        Ok(())
    }

    #[test]
    fn login_urls_use_host_and_port_of_the_admin_url() -> anyhow::Result<()> {
        let admin = Url::parse("postgres://opledger_admin@127.0.0.1:54321/postgres")?;
        assert_eq!(
            login_url(&admin, "opledger_t_x", "opledger_inbox_test", "pw")?,
            "postgres://opledger_inbox_test:pw@127.0.0.1:54321/opledger_t_x"
        );
        assert_eq!(
            database_url(&admin, "opledger_t_x"),
            "postgres://opledger_admin@127.0.0.1:54321/opledger_t_x"
        );
        Ok(())
    }

    #[test]
    fn template_name_is_stable() {
        let name = template_name();
        assert_eq!(name, template_name());
        assert_eq!(name.len(), "opledger_tpl_".len() + 16);
        assert!(name.starts_with("opledger_tpl_"));
    }
}
