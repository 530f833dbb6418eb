//! Error text for logs and answers that never leaks a URL (the Tencent usersig travels in the
//! query string).

/// `err` without its URL, followed by its source chain (`a: b: c`).
pub fn reqwest_chain(err: reqwest::Error) -> String {
    let err = err.without_url();
    let mut text = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
