//! [`WalletError`]: why a wallet call did not give its answer, and the bounded
//! [`FailureClass`] logs use. Messages are short and never carry a URL or a response body.

/// Longest text kept from a transport error.
const MAX_TEXT: usize = 160;

/// A wallet call that did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WalletError {
    /// The wallet refused the debit: the user's balance is below the amount. Nothing was
    /// debited.
    #[error("insufficient balance")]
    InsufficientBalance,
    /// The wallet could not be asked or gave no usable answer; a debit may or may not have
    /// been taken (the same key again settles it).
    #[error("wallet unavailable ({class}): {detail}")]
    Unavailable {
        /// What went wrong, bounded.
        class: FailureClass,
        /// A short description (no URL, no body).
        detail: String,
    },
}

/// Why the wallet was unavailable, as a bounded value for logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    /// No answer within `wallet.timeout`.
    Timeout,
    /// Connecting, sending or reading failed.
    Transport,
    /// An HTTP status the contract does not give for this call (a 5xx, an unexpected 4xx).
    Status,
    /// The expected status with a body that does not decode.
    Answer,
    /// The client could not be built from its options.
    Config,
}

impl FailureClass {
    /// `timeout`, `transport`, `status`, `answer` or `config`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::Timeout => "timeout",
            FailureClass::Transport => "transport",
            FailureClass::Status => "status",
            FailureClass::Answer => "answer",
            FailureClass::Config => "config",
        }
    }
}

impl std::fmt::Display for FailureClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl WalletError {
    /// An unavailable wallet of `class`, described by `detail` (shortened).
    pub fn unavailable(class: FailureClass, detail: impl AsRef<str>) -> Self {
        WalletError::Unavailable { class, detail: shorten(detail.as_ref()) }
    }

    /// A transport failure, its URL stripped and its source chain kept as short text.
    pub fn from_reqwest(err: reqwest::Error) -> Self {
        if err.is_timeout() {
            return WalletError::unavailable(FailureClass::Timeout, "no answer in time");
        }
        WalletError::unavailable(FailureClass::Transport, crate::error_text::reqwest_chain(err))
    }

    /// The class of an unavailable wallet; `None` for a refused debit.
    pub fn class(&self) -> Option<FailureClass> {
        match self {
            WalletError::InsufficientBalance => None,
            WalletError::Unavailable { class, .. } => Some(*class),
        }
    }
}

/// At most [`MAX_TEXT`] bytes of `text`, cut on a character boundary.
fn shorten(text: &str) -> String {
    if text.len() <= MAX_TEXT {
        return text.to_owned();
    }
    let mut end = MAX_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_details_are_cut_on_a_char_boundary() {
        let long = "é".repeat(200);
        let WalletError::Unavailable { detail, .. } =
            WalletError::unavailable(FailureClass::Transport, &long)
        else {
            panic!("unavailable expected");
        };
        assert!(detail.len() <= MAX_TEXT + '…'.len_utf8(), "{}", detail.len());
        assert!(detail.ends_with('…'));
        assert_eq!(WalletError::InsufficientBalance.class(), None);
    }
}
