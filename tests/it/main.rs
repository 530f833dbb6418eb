//! The one integration-test binary: real loopback HTTP between our components.

mod tencent_im;
