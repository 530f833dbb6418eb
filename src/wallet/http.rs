//! [`HttpWallet`]: the wallet service over HTTP (reqwest), each call bounded by
//! `wallet.timeout`. It maps the contract's answers onto [`Debited`], a refund's `refunded` and
//! [`WalletError`]; anything else (a timeout, a 5xx, a body that does not decode) is
//! [`WalletError::Unavailable`] with its [`FailureClass`].

use std::time::Duration;

use async_trait::async_trait;
use reqwest::StatusCode;
use serde::de::DeserializeOwned;

use super::wire::{
    DEBITS_PATH, DebitAnswer, DebitRequest, ErrorAnswer, INSUFFICIENT_BALANCE, REFUNDS_PATH, RefundAnswer,
    RefundRequest,
};
use super::{Debit, Debited, FailureClass, Wallet, WalletError};

/// Longest a connection attempt may take (the whole call is bounded by the timeout anyway).
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Settings of an [`HttpWallet`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpWalletOptions {
    /// Origin of the wallet service, e.g. `http://wallet:7000` (a trailing slash is ignored).
    pub base_url: String,
    /// Bound on one call, connect to last byte.
    pub timeout: Duration,
}

/// The wallet service over HTTP; cheap to clone (one connection pool).
#[derive(Debug, Clone)]
pub struct HttpWallet {
    client: reqwest::Client,
    debits: reqwest::Url,
    refunds: reqwest::Url,
}

impl HttpWallet {
    /// A client for `options.base_url`; fails on a base URL that is not http(s).
    pub fn new(options: HttpWalletOptions) -> Result<Self, WalletError> {
        let base = options.base_url.trim_end_matches('/');
        let endpoint = |path: &str| {
            let url = reqwest::Url::parse(&format!("{base}{path}"))
                .map_err(|_| WalletError::unavailable(FailureClass::Config, "base_url is not a URL"))?;
            if !matches!(url.scheme(), "http" | "https") {
                return Err(WalletError::unavailable(FailureClass::Config, "base_url must be http or https"));
            }
            Ok(url)
        };
        let client = reqwest::Client::builder()
            .timeout(options.timeout)
            .connect_timeout(options.timeout.min(MAX_CONNECT_TIMEOUT))
            .pool_idle_timeout(Duration::from_secs(60))
            .tcp_keepalive(Duration::from_secs(30))
            // A redirected debit would be a debit somewhere else: treat it as an error.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(WalletError::from_reqwest)?;
        Ok(Self { client, debits: endpoint(DEBITS_PATH)?, refunds: endpoint(REFUNDS_PATH)? })
    }

    /// POSTs `body` to `url`; the status and the whole answer body.
    async fn post<B: serde::Serialize + Sync>(
        &self,
        url: &reqwest::Url,
        body: &B,
    ) -> Result<(StatusCode, Vec<u8>), WalletError> {
        let response =
            self.client.post(url.clone()).json(body).send().await.map_err(WalletError::from_reqwest)?;
        let status = response.status();
        let body = response.bytes().await.map_err(WalletError::from_reqwest)?;
        Ok((status, body.to_vec()))
    }
}

#[async_trait]
impl Wallet for HttpWallet {
    async fn debit(&self, debit: &Debit) -> Result<Debited, WalletError> {
        let request = DebitRequest {
            idempotency_key: debit.idempotency_key.clone(),
            user_id: debit.user_id.clone(),
            amount: debit.amount,
        };
        match self.post(&self.debits, &request).await? {
            (StatusCode::OK, body) => {
                let answer: DebitAnswer = decode(&body, "debit")?;
                Ok(Debited {
                    debit_id: answer.debit_id,
                    balance: answer.balance,
                    user_id: answer.user_id,
                    amount: answer.amount,
                })
            }
            (StatusCode::CONFLICT, body) if error_code(&body).as_deref() == Some(INSUFFICIENT_BALANCE) => {
                Err(WalletError::InsufficientBalance)
            }
            (status, body) => Err(unexpected(status, &body)),
        }
    }

    async fn refund(&self, idempotency_key: &str) -> Result<bool, WalletError> {
        let request = RefundRequest { idempotency_key: idempotency_key.to_owned() };
        match self.post(&self.refunds, &request).await? {
            (StatusCode::OK, body) => Ok(decode::<RefundAnswer>(&body, "refund")?.refunded),
            (status, body) => Err(unexpected(status, &body)),
        }
    }
}

/// The answer of a `call`, or why it is not one.
fn decode<T: DeserializeOwned>(body: &[u8], call: &str) -> Result<T, WalletError> {
    serde_json::from_slice(body)
        .map_err(|e| WalletError::unavailable(FailureClass::Answer, format!("{call} answer: {e}")))
}

/// The `error.code` of an error answer, if the body is one.
fn error_code(body: &[u8]) -> Option<String> {
    serde_json::from_slice::<ErrorAnswer>(body).ok().map(|a| a.error.code)
}

/// A status the contract does not give: named with its error code when the body has one.
fn unexpected(status: StatusCode, body: &[u8]) -> WalletError {
    let detail = match error_code(body) {
        Some(code) => format!("http {} ({code})", status.as_u16()),
        None => format!("http {}", status.as_u16()),
    };
    WalletError::unavailable(FailureClass::Status, detail)
}
