//! [`Backend`]: a database the store runs on — its [`Dialect`] (what its SQL says differently)
//! and the three things only sqlx's concrete types know: running a statement on the pool,
//! running one on a connection, and decoding a row. Every role of
//! [`SqlRepository`](super::SqlRepository) is one `impl<DB: Backend>`; [`Run`] gives those impls
//! sqlx's `execute` and `fetch_*` on a [`QueryBuilder`] of any backend.
//!
//! Why the backend answers these itself rather than through bounds: sqlx implements `Executor`
//! for `&mut MySqlConnection`, `Decode<MySql>` for `i64` and so on one backend at a time, so a
//! generic impl needs `for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>` and one
//! `for<'r> T: FromRow<'r, DB::Row>` per row type. Rust implies only the bounds a trait puts on
//! `Self` and its associated types, never ones like these, so a `Backend` carrying them as
//! where-clauses would still have every impl and function that names it restate them. Each
//! backend answers them instead, in its impl below: the two impls read alike, but each is
//! checked against its own concrete types, which is what a generic one cannot be.

use std::future::Future;

use sqlx::mysql::MySqlRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{Database, Executor, FromRow, IntoArguments, MySql, Pool, QueryBuilder, Sqlite};

use super::sql::Dialect;

/// A database the store runs on; see the module docs.
pub(super) trait Backend: Dialect + Database<Arguments: IntoArguments<Self>> {
    /// The pool, as sqlx's executor (each statement on a connection of its own).
    fn on_pool(pool: &Pool<Self>) -> impl Executor<'_, Database = Self>;

    /// A connection — a transaction's, as `&mut tx` — as sqlx's executor.
    fn on_conn(conn: &mut Self::Connection) -> impl Executor<'_, Database = Self>;

    /// One row as `T`.
    fn decode<T: Readable>(row: &Self::Row) -> Result<T, sqlx::Error>;
}

impl Backend for MySql {
    fn on_pool(pool: &Pool<Self>) -> impl Executor<'_, Database = Self> {
        pool
    }

    fn on_conn(conn: &mut Self::Connection) -> impl Executor<'_, Database = Self> {
        conn
    }

    fn decode<T: Readable>(row: &Self::Row) -> Result<T, sqlx::Error> {
        T::from_row(row)
    }
}

impl Backend for Sqlite {
    fn on_pool(pool: &Pool<Self>) -> impl Executor<'_, Database = Self> {
        pool
    }

    fn on_conn(conn: &mut Self::Connection) -> impl Executor<'_, Database = Self> {
        conn
    }

    fn decode<T: Readable>(row: &Self::Row) -> Result<T, sqlx::Error> {
        T::from_row(row)
    }
}

/// A row the store reads back — a `#[derive(sqlx::FromRow)]` struct, a tuple of columns, or
/// `()` for "is there a row" — decodable from the rows of either backend.
pub(super) trait Readable: for<'r> FromRow<'r, MySqlRow> + for<'r> FromRow<'r, SqliteRow> {}

impl<T> Readable for T where T: for<'r> FromRow<'r, MySqlRow> + for<'r> FromRow<'r, SqliteRow> {}

/// Where a statement runs: `&pool`, or a connection (`&mut *tx` inside a transaction).
pub(super) trait On<'e, DB: Backend>: 'e {
    /// As sqlx's executor.
    fn executor(self) -> impl Executor<'e, Database = DB>;
}

impl<'e, DB: Backend> On<'e, DB> for &'e Pool<DB> {
    fn executor(self) -> impl Executor<'e, Database = DB> {
        DB::on_pool(self)
    }
}

impl<'e, DB: Backend> On<'e, DB> for &'e mut DB::Connection {
    fn executor(self) -> impl Executor<'e, Database = DB> {
        DB::on_conn(self)
    }
}

/// sqlx's `build().execute(..)` and `build_query_as::<T>().fetch_*(..)` on a statement of any
/// [`Backend`], rows decoded by [`Backend::decode`] (a scalar is read as the tuple `(T,)`).
pub(super) trait Run<DB: Backend> {
    /// Runs the statement; the rows it changed.
    fn execute<'e>(
        &'e mut self,
        on: impl On<'e, DB>,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send + 'e;

    /// Every row.
    fn fetch_all<'e, T: Readable>(
        &'e mut self,
        on: impl On<'e, DB>,
    ) -> impl Future<Output = Result<Vec<T>, sqlx::Error>> + Send + 'e;

    /// The first row, if any.
    fn fetch_optional<'e, T: Readable>(
        &'e mut self,
        on: impl On<'e, DB>,
    ) -> impl Future<Output = Result<Option<T>, sqlx::Error>> + Send + 'e;

    /// The first row; [`sqlx::Error::RowNotFound`] when there is none.
    fn fetch_one<'e, T: Readable>(
        &'e mut self,
        on: impl On<'e, DB>,
    ) -> impl Future<Output = Result<T, sqlx::Error>> + Send + 'e;
}

impl<DB: Backend> Run<DB> for QueryBuilder<DB> {
    fn execute<'e>(
        &'e mut self,
        on: impl On<'e, DB>,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send + 'e {
        let done = self.build().execute(on.executor());
        async move { Ok(DB::rows_affected(&done.await?)) }
    }

    fn fetch_all<'e, T: Readable>(
        &'e mut self,
        on: impl On<'e, DB>,
    ) -> impl Future<Output = Result<Vec<T>, sqlx::Error>> + Send + 'e {
        let rows = self.build().fetch_all(on.executor());
        async move { rows.await?.iter().map(DB::decode).collect() }
    }

    fn fetch_optional<'e, T: Readable>(
        &'e mut self,
        on: impl On<'e, DB>,
    ) -> impl Future<Output = Result<Option<T>, sqlx::Error>> + Send + 'e {
        let row = self.build().fetch_optional(on.executor());
        async move { row.await?.as_ref().map(DB::decode).transpose() }
    }

    fn fetch_one<'e, T: Readable>(
        &'e mut self,
        on: impl On<'e, DB>,
    ) -> impl Future<Output = Result<T, sqlx::Error>> + Send + 'e {
        let row = self.build().fetch_one(on.executor());
        async move { DB::decode(&row.await?) }
    }
}
