//! TODO module doc
