//! A fresh, migrated benchmark database with a login role for the service under test.

use anyhow::Context;
use opledger_domain::ids::TenantId;
use opledger_store::{MIGRATOR, Store, StoreConfig};
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

/// A benchmark database: the owner's pool and the URL of the restricted login role.
#[derive(Debug)]
pub struct BenchDatabase {
    /// Superuser pool on the new database, for setup and checks.
    pub owner: PgPool,
    /// URL of `user` on the new database (TCP or unix socket, like the admin URL).
    pub role_url: String,
}

/// A login role of one of the migrations' group roles, the way a deployment creates one.
#[derive(Debug, Clone, Copy)]
pub struct LoginRole<'a> {
    /// Role name.
    pub user: &'a str,
    /// Its password (benchmark-only).
    pub password: &'a str,
    /// The group role it joins: one service's (`opledger_operations`, `opledger_inbox`, ...).
    pub group: &'a str,
}

/// [`fresh`] with the login role `role`, and a tenant `bench` created by the owner: what the
/// create and webhook benchmarks start from.
pub async fn fresh_service_tenant(
    admin: &PgConnectOptions,
    db: &str,
    role: LoginRole<'_>,
) -> anyhow::Result<(BenchDatabase, Store, TenantId)> {
    let database = fresh(admin, db, 10, role).await?;
    let store = Store::from_pool(database.owner.clone(), StoreConfig::default());
    let tenant = store
        .create_tenant("bench")
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
    Ok((database, store, tenant))
}

/// Drops and recreates `db`, applies the migrations and creates `role` if missing.
pub async fn fresh(
    admin: &PgConnectOptions,
    db: &str,
    pool_size: u32,
    role: LoginRole<'_>,
) -> anyhow::Result<BenchDatabase> {
    let maintenance = PgPool::connect_with(admin.clone()).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {db} WITH (FORCE)"
    )))
    .execute(&maintenance)
    .await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {db}")))
        .execute(&maintenance)
        .await?;
    maintenance.close().await;
    let owner = PgPoolOptions::new()
        .max_connections(pool_size)
        .connect_with(admin.clone().database(db))
        .await?;
    MIGRATOR.run(&owner).await?;
    let role_url = login_role(&owner, admin, db, role).await?;
    Ok(BenchDatabase { owner, role_url })
}

/// Creates `role` if missing (the way a deployment creates a service's login) and returns its
/// URL on `db`.
pub async fn login_role(
    owner: &PgPool,
    admin: &PgConnectOptions,
    db: &str,
    role: LoginRole<'_>,
) -> anyhow::Result<String> {
    let exists: Option<(i32,)> = sqlx::query_as("SELECT 1 FROM pg_roles WHERE rolname = $1")
        .bind(role.user)
        .fetch_optional(owner)
        .await?;
    if exists.is_none() {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "CREATE ROLE {} LOGIN PASSWORD '{}' IN ROLE {}",
            role.user, role.password, role.group
        )))
        .execute(owner)
        .await?;
    }
    let (host, port) = (admin.get_host(), admin.get_port());
    let (user, password) = (role.user, role.password);
    Ok(if host.starts_with('/') {
        format!("postgres://{user}:{password}@localhost:{port}/{db}?host={host}")
    } else {
        format!("postgres://{user}:{password}@{host}:{port}/{db}")
    })
}

/// The admin URL pointed at another database (keeps credentials and query parameters): what
/// `pgbench` connects with.
pub fn database_url(admin_url: &str, db: &str) -> anyhow::Result<String> {
    let (base, query) = match admin_url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (admin_url, String::new()),
    };
    let (server, _) = base
        .rsplit_once('/')
        .filter(|(server, _)| server.contains("://"))
        .context("the admin url has no database part")?;
    Ok(format!("{server}/{db}{query}"))
}
