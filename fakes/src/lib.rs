//! Stand-ins for the services room-service calls, faithful to their wire contracts, for its
//! tests, demos, benchmarks and the compose stack — never part of the service itself:
//!
//! - [`fake_im`]: Tencent Cloud IM's REST API (`send_group_msg` and the group admin APIs,
//!   usersig checks, Tencent's rate limits and error codes, injectable faults), recording what
//!   it accepted, each group's state and a journal of every call;
//! - [`fake_wallet`]: the wallet's debit/refund contract, with balances and faults.
//!
//! Each runs in-process ([`fake_im::FakeIm::start`], [`fake_wallet::FakeWallet::start`]) or as
//! the `room-service-fakes` binary (`room-service-fakes fake-im`, `room-service-fakes
//! fake-wallet`), with a control API under `/fake/*`.
#![forbid(unsafe_code)]

pub mod fake_im;
pub mod fake_wallet;
