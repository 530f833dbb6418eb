//! The one integration-test binary: real loopback HTTP and real databases between our
//! components. Shared helpers live in `support/`.

mod api;
mod im_e2e;
mod marker;
mod outbox;
mod process;
mod store;
mod support;
mod tencent_im;
