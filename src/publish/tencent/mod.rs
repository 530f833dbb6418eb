//! Tencent Cloud IM leaf (placeholder while the client lands).

pub mod usersig;
