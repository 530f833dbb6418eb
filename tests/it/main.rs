//! The one integration-test binary: real loopback HTTP between our components.

mod outbox;
mod tencent_im;
