//! The database: one SQLite file by default, PostgreSQL when `DATABASE_URL` says so.
//!
//! Both dialects go through sqlx's `Any` driver with `$1` placeholders and simple column
//! types (i64, f64, String). SQLite (WAL) has one writing connection, so every write is
//! serialised in-process and transactions never fail with `SQLITE_BUSY`, plus a pool of
//! read-only connections for the agents' config polls ([`Db::read`]): in WAL mode readers
//! and the writer never wait for each other, so polls never queue behind writes.
//! PostgreSQL gets one real pool (`VF_DB_MAX_CONNECTIONS`) serving both, and races between
//! replicas are settled by row versions and unique indexes.

use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, Executor};

/// Which SQL dialect the pool speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// Bound value number `i` (from 1) in a generated statement whose values appear in
    /// order: `$i` on PostgreSQL, an anonymous `?` on SQLite. SQLite finds a numbered
    /// parameter by a linear scan of the statement's names, so binding n numbered values
    /// costs n²: a 3,000-value batch statement spent most of its time there.
    pub fn param(self, i: usize) -> String {
        match self {
            Dialect::Sqlite => "?".to_string(),
            Dialect::Postgres => format!("${i}"),
        }
    }

    /// `n` bound values numbered from `first`, comma-separated ([`Dialect::param`]).
    pub fn params(self, n: usize, first: usize) -> String {
        (first..first + n)
            .map(|i| self.param(i))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `(..), (..)`: `rows` tuples of `width` bound values numbered from `first`, row by row.
    pub fn tuples(self, rows: usize, width: usize, first: usize) -> String {
        (0..rows)
            .map(|row| format!("({})", self.params(width, first + row * width)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// How many connections to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolSizes {
    /// PostgreSQL: the pool every query uses.
    pub postgres: u32,
    /// SQLite: the read-only connections of [`Db::read`] (the writer is always one).
    pub sqlite_readers: u32,
}

impl Default for PoolSizes {
    fn default() -> Self {
        PoolSizes {
            postgres: 10,
            sqlite_readers: 4,
        }
    }
}

/// The shared handle to the database.
#[derive(Debug, Clone)]
pub struct Db {
    /// Every write, and reads that must see them.
    pub pool: AnyPool,
    /// Reads on the agents' hot path: SQLite's read-only connections, or on PostgreSQL the
    /// same pool as [`Db::pool`]. A read here sees every committed write.
    pub read: AnyPool,
    /// On PostgreSQL, two connections of the native driver for [`Db::bulk_rows`]: the `Any`
    /// driver copies every value once more, and a whole-fleet read decodes 700,000.
    bulk: Option<sqlx::PgPool>,
    pub dialect: Dialect,
    /// Polls' last-seen times not written yet; node reads overlay them.
    pub last_seen: std::sync::Arc<crate::fleet::LastSeen>,
    /// Heartbeats waiting for the next group commit.
    pub heartbeats: std::sync::Arc<crate::heartbeat::HeartbeatQueue>,
    /// The highest fleet generation seen committed ([`crate::generation`]).
    pub generation: std::sync::Arc<crate::generation::FleetGeneration>,
}

impl Db {
    /// Connects with the default pool sizes (see [`Db::connect_with`]).
    pub async fn connect(url: &str) -> anyhow::Result<Db> {
        Self::connect_with(url, PoolSizes::default()).await
    }

    /// Connects (creating a SQLite file if missing) and applies pending migrations.
    pub async fn connect_with(url: &str, sizes: PoolSizes) -> anyhow::Result<Db> {
        sqlx::any::install_default_drivers();
        let dialect = dialect_of(url)?;
        let (pool, read, bulk) = match dialect {
            Dialect::Sqlite => {
                let url = sqlite_url_creating_file(url);
                let options = AnyConnectOptions::from_str(&url)
                    .with_context(|| "DATABASE_URL is not a valid sqlite URL".to_string())?;
                let writer = AnyPoolOptions::new()
                    .max_connections(1)
                    .acquire_timeout(Duration::from_secs(30))
                    .test_before_acquire(false)
                    .after_connect(|conn, _| {
                        Box::pin(async move {
                            conn.execute("PRAGMA journal_mode = WAL").await?;
                            conn.execute("PRAGMA busy_timeout = 5000").await?;
                            conn.execute("PRAGMA foreign_keys = ON").await?;
                            conn.execute("PRAGMA synchronous = NORMAL").await?;
                            Ok(())
                        })
                    })
                    .connect_with(options.clone())
                    .await
                    .context("opening the SQLite database")?;
                // Opened lazily, after the writer set WAL mode; `query_only` refuses writes.
                // Readers map the file instead of copying each page through a read call: a
                // whole-fleet read at 100,000 nodes touches tens of thousands of pages
                // (about 45 % faster). Mapped pages are the kernel's page cache, shared and
                // reclaimable, though counted in the process's resident size.
                let readers = AnyPoolOptions::new()
                    .max_connections(sizes.sqlite_readers.max(1))
                    .acquire_timeout(Duration::from_secs(30))
                    .test_before_acquire(false)
                    .after_connect(|conn, _| {
                        Box::pin(async move {
                            conn.execute("PRAGMA busy_timeout = 5000").await?;
                            conn.execute("PRAGMA query_only = ON").await?;
                            conn.execute("PRAGMA mmap_size = 1073741824").await?;
                            Ok(())
                        })
                    })
                    .connect_lazy_with(options);
                // An in-memory database exists once per connection: read through the writer.
                if url.contains(":memory:") {
                    (writer.clone(), writer, None)
                } else {
                    (writer, readers, None)
                }
            }
            Dialect::Postgres => {
                let pool = AnyPoolOptions::new()
                    .max_connections(sizes.postgres.max(1))
                    .acquire_timeout(Duration::from_secs(10))
                    // sqlx pings a connection before handing it out by default: a second
                    // round trip for every one-statement read (a third of a PostgreSQL
                    // poll's time in perf). A connection that broke fails its statement
                    // instead, and the pool drops it.
                    .test_before_acquire(false)
                    .connect(url)
                    .await
                    .context("connecting to PostgreSQL")?;
                let bulk = sqlx::postgres::PgPoolOptions::new()
                    .max_connections(2)
                    .acquire_timeout(Duration::from_secs(10))
                    .test_before_acquire(false)
                    .connect_lazy(url)
                    .context("connecting to PostgreSQL")?;
                (pool.clone(), pool, Some(bulk))
            }
        };
        let db = Db {
            pool,
            read,
            bulk,
            dialect,
            last_seen: Default::default(),
            heartbeats: Default::default(),
            generation: Default::default(),
        };
        db.migrate().await?;
        db.refresh_generation().await?;
        Ok(db)
    }

    /// The rows of `select` (a query whose result columns are `columns`, with `$1` bound to
    /// `arg`), read the way each database reads many rows fastest; they come in no set order.
    /// For reads of a whole fleet. `T`'s fields are `columns` in order.
    ///
    /// - SQLite (on [`Db::read`]) packs them into one JSON array of arrays
    ///   (`json_group_array`), each inner array decoded by position into a `T`: row by row
    ///   through sqlx's SQLite worker costs about a microsecond a value; packed, 100,000
    ///   node rows read in a tenth of the time.
    /// - PostgreSQL (on its own two connections) sends plain rows, decoded by the native
    ///   driver: there packing costs more than it saves (100,000 reports read in 160 ms
    ///   through `json_agg`, 100 ms as rows through the `Any` driver, 65 ms through the
    ///   native one).
    pub(crate) async fn bulk_rows<T: BulkRow>(
        &self,
        columns: &str,
        select: &str,
        arg: &str,
    ) -> crate::Result<Vec<T>> {
        match self.dialect {
            Dialect::Sqlite => {
                let statement =
                    format!("SELECT json_group_array(json_array({columns})) FROM ({select})");
                let packed: String = sqlx::query_scalar(sqlx::AssertSqlSafe(statement))
                    .bind(arg)
                    .fetch_one(&self.read)
                    .await?;
                Ok(serde_json::from_str(&packed)?)
            }
            Dialect::Postgres => {
                let pool = self.bulk.as_ref().ok_or_else(|| {
                    anyhow::anyhow!("a PostgreSQL database without its bulk-read pool")
                })?;
                Ok(sqlx::query_as(sqlx::AssertSqlSafe(select.to_string()))
                    .bind(arg)
                    .fetch_all(pool)
                    .await?)
            }
        }
    }

    async fn migrate(&self) -> anyhow::Result<()> {
        match self.dialect {
            Dialect::Sqlite => sqlx::migrate!("../migrations/sqlite").run(&self.pool).await,
            Dialect::Postgres => {
                sqlx::migrate!("../migrations/postgres")
                    .run(&self.pool)
                    .await
            }
        }
        .context("applying database migrations")
    }

    /// A write transaction on [`Db::pool`] that holds the write lock from its start. On SQLite
    /// (`BEGIN IMMEDIATE`) this makes a writer that finds the file locked by another
    /// connection (an operator's `sqlite3`, say) wait out `busy_timeout`: a deferred
    /// transaction that read first fails at its first write at once instead.
    pub async fn begin_write(&self) -> crate::Result<sqlx::Transaction<'static, sqlx::Any>> {
        Ok(match self.dialect {
            Dialect::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await?,
            Dialect::Postgres => self.pool.begin().await?,
        })
    }

    /// A read transaction whose statements all see the database at one instant: on
    /// PostgreSQL `REPEATABLE READ, READ ONLY` (one snapshot, taken at its first statement);
    /// on SQLite any transaction reads one snapshot in WAL mode. Answers assembled from
    /// several reads (the edge config; a node's config when its one-statement read raced a
    /// transition) read through it, so a change committing between two of the reads is seen
    /// whole or not at all. Opened on [`Db::read`]. Drop or commit it when done.
    pub async fn snapshot(&self) -> crate::Result<sqlx::Transaction<'static, sqlx::Any>> {
        let mut tx = self.read.begin().await?;
        if self.dialect == Dialect::Postgres {
            sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                .execute(&mut *tx)
                .await?;
        }
        Ok(tx)
    }

    /// True when the database answers a trivial query (`/readyz`).
    pub async fn ping(&self) -> bool {
        sqlx::query("SELECT 1").execute(&self.pool).await.is_ok()
    }
}

fn dialect_of(url: &str) -> anyhow::Result<Dialect> {
    if url.starts_with("sqlite:") {
        Ok(Dialect::Sqlite)
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Dialect::Postgres)
    } else {
        anyhow::bail!("DATABASE_URL must start with sqlite: or postgres://")
    }
}

/// One server process per SQLite file. The process mirrors the fleet generation in memory
/// (`vf_control::generation`), which holds only while it makes every write, so a second
/// server on the same file is refused at start-up, by an exclusive lock on `<file>.lock`
/// (released when the process ends, however it ends). Several replicas need PostgreSQL.
pub fn lock_sqlite_file(database_url: &str) -> anyhow::Result<Option<std::fs::File>> {
    if !database_url.starts_with("sqlite:") || database_url.contains(":memory:") {
        return Ok(None);
    }
    let options = sqlx::sqlite::SqliteConnectOptions::from_str(database_url)
        .context("DATABASE_URL is not a valid sqlite URL")?;
    let mut path = options.get_filename().as_os_str().to_owned();
    path.push(".lock");
    let path = std::path::PathBuf::from(path);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "another VectorFlow server is using this SQLite database ({} is locked): one \
             server process per SQLite file; run several replicas on PostgreSQL",
            path.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("locking {}", path.display()))
        }
    }
}

/// Adds `mode=rwc` so the SQLite file is created on first start.
fn sqlite_url_creating_file(url: &str) -> String {
    if url.contains("mode=") || url.contains(":memory:") {
        url.to_string()
    } else if url.contains('?') {
        format!("{url}&mode=rwc")
    } else {
        format!("{url}?mode=rwc")
    }
}

/// A query string assembled from trusted constants (column lists), never from input:
/// `sql!("SELECT {COLUMNS} FROM t WHERE id = $1")`. Values always go through binds.
#[macro_export]
macro_rules! sql {
    ($($t:tt)*) => {
        sqlx::AssertSqlSafe(format!($($t)*))
    };
}

/// A row [`Db::bulk_rows`] can read on either database: decoded from a packed JSON array
/// (SQLite) or from a native row (PostgreSQL), its fields in column order.
pub(crate) trait BulkRow:
    serde::de::DeserializeOwned + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> + Send + Unpin
{
}

impl<T> BulkRow for T where
    T: serde::de::DeserializeOwned
        + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>
        + Send
        + Unpin
{
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_statements_number_their_values_on_postgres_and_not_on_sqlite() {
        assert_eq!(
            Dialect::Postgres.tuples(2, 3, 1),
            "($1, $2, $3), ($4, $5, $6)"
        );
        assert_eq!(Dialect::Postgres.params(2, 5), "$5, $6");
        assert_eq!(Dialect::Sqlite.tuples(2, 2, 1), "(?, ?), (?, ?)");
    }

    #[test]
    fn database_urls_choose_their_dialect_or_are_refused() {
        assert_eq!(dialect_of("sqlite://vf.db").ok(), Some(Dialect::Sqlite));
        assert_eq!(
            dialect_of("postgres://u@localhost/db").ok(),
            Some(Dialect::Postgres)
        );
        assert!(dialect_of("mysql://x").is_err());
    }

    #[test]
    fn sqlite_urls_create_the_file_unless_a_mode_is_given() {
        assert_eq!(
            sqlite_url_creating_file("sqlite://a.db"),
            "sqlite://a.db?mode=rwc"
        );
        assert_eq!(
            sqlite_url_creating_file("sqlite://a.db?mode=ro"),
            "sqlite://a.db?mode=ro"
        );
    }

    #[test]
    fn a_second_server_on_one_sqlite_file_is_refused_until_the_first_lets_go() {
        let path = std::env::temp_dir().join(format!("vf-lock-{}.db", crate::ids::new_id()));
        let url = format!("sqlite://{}", path.display());
        let first = lock_sqlite_file(&url).unwrap();
        assert!(first.is_some());
        let refused = lock_sqlite_file(&url).unwrap_err().to_string();
        assert!(refused.contains("another VectorFlow server"), "{refused}");
        assert!(refused.contains("PostgreSQL"), "{refused}");
        drop(first);
        assert!(lock_sqlite_file(&url).unwrap().is_some());
        assert!(lock_sqlite_file("sqlite::memory:").unwrap().is_none());
        assert!(lock_sqlite_file("postgres://u@localhost/db")
            .unwrap()
            .is_none());
        let _ = std::fs::remove_file(path.with_extension("db.lock"));
    }
}
