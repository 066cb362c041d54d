//! PostgreSQL for the end-to-end tests: the server CI gives (`DATABASE_URL_POSTGRES`),
//! and a database of a test's own on it.

use sqlx::Connection as _;

/// `DATABASE_URL_POSTGRES`, or `None` (then a test says it skipped PostgreSQL);
/// under `CI=true` its absence is a failure.
pub fn postgres_url() -> Option<String> {
    match std::env::var("DATABASE_URL_POSTGRES") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true but DATABASE_URL_POSTGRES is unset"
            );
            None
        }
    }
}

/// `postgres://u@h:p/db?x` → the same server, database `name`.
pub fn with_database(url: &str, name: &str) -> String {
    let (head, query) = url
        .split_once('?')
        .map_or((url, None), |(h, q)| (h, Some(q)));
    let base = head.rsplit_once('/').map_or(head, |(b, _)| b);
    match query {
        Some(q) => format!("{base}/{name}?{q}"),
        None => format!("{base}/{name}"),
    }
}

/// Runs `sql` (`CREATE DATABASE`, `DROP DATABASE`) on the server of `url`.
pub async fn admin(url: &str, sql: String) {
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
}
