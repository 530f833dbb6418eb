//! [`Run`]: sqlx's `build().execute(..)` and `build_query_as::<T>().fetch_*(..)` on a
//! [`QueryBuilder`] of any [`Backend`], on the pool or on a transaction's connection ([`On`]),
//! rows decoded by [`Backend::decode`]. Every role's impl runs its statements through it.

use std::future::Future;

use sqlx::{Executor, Pool, QueryBuilder};

use super::{Backend, Readable};

/// Where a statement runs: `&pool`, or a connection (`&mut *tx` inside a transaction).
pub(in crate::store) trait On<'e, DB: Backend>: 'e {
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
pub(in crate::store) trait Run<DB: Backend> {
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
