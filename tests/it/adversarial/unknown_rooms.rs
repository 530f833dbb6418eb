//! (filled in by the change that makes its promise)
