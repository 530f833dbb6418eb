//! The wallet's HTTP contract (SPEC §11.4), shared by [`super::HttpWallet`] and the fake:
//!
//! - `POST /v1/debits` `{"idempotency_key","user_id","amount"}` → 200
//!   `{"debit_id","balance","user_id","amount"}` (the debit taken under the key: whose and how
//!   much), or 409 `{"error":{"code":"insufficient_balance"}}`; the same key again answers the
//!   first answer — the first debit's user and amount — and never debits twice.
//! - `POST /v1/refunds` `{"idempotency_key"}` → 200 `{"refunded": bool}` (idempotent; false
//!   when nothing was debited under that key).
//!
//! Answers are read leniently (unknown fields ignored: the real wallet may add some); the fake
//! reads requests strictly, so a client that drifts from the contract fails its tests.

use serde::{Deserialize, Serialize};

/// Path of the debit call.
pub const DEBITS_PATH: &str = "/v1/debits";
/// Path of the refund call.
pub const REFUNDS_PATH: &str = "/v1/refunds";
/// The error code of a debit over the user's balance (HTTP 409).
pub const INSUFFICIENT_BALANCE: &str = "insufficient_balance";

/// Body of `POST /v1/debits`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DebitRequest {
    /// The same key again never debits twice.
    pub idempotency_key: String,
    /// Whose balance.
    pub user_id: String,
    /// How much.
    pub amount: u64,
}

/// 200 answer of `POST /v1/debits`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DebitAnswer {
    /// The wallet's id of the debit.
    pub debit_id: String,
    /// The balance right after the debit.
    pub balance: u64,
    /// Whose balance the debit under the key was taken from (absent from a wallet that does not
    /// say: the room service then refuses the gift, `payment_mismatch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// How much the debit under the key took (absent: as for `user_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<u64>,
}

/// Body of `POST /v1/refunds`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefundRequest {
    /// The key the debit was taken under.
    pub idempotency_key: String,
}

/// 200 answer of `POST /v1/refunds`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefundAnswer {
    /// False when nothing was debited under the key.
    pub refunded: bool,
}

/// An error answer: `{"error":{"code":"..."}}` (a message may come along).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorAnswer {
    /// The error.
    pub error: ErrorDetail,
}

/// The inside of an [`ErrorAnswer`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// Stable snake_case code.
    pub code: String,
    /// Human text, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl ErrorAnswer {
    /// An error answer with `code` and `message`.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        ErrorAnswer { error: ErrorDetail { code: code.into(), message: Some(message.into()) } }
    }
}
