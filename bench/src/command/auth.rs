//! B1 under `auth.mode: jwt`: the same load, every command carrying its user's bearer token,
//! verified with HS256 (`auth.jwt.secret`) and with RS256 (a PEM public key file), beside the
//! `none` run of the same invocation: what verifying a token costs a command. The tokens are
//! minted before the timed part (not measured), one per user, with a throwaway RSA key that
//! exists only for this benchmark.

use std::collections::HashMap;

use jsonwebtoken::{Algorithm, EncodingKey, Header};

use super::*;

/// The HS256 key of the benchmark.
pub(crate) const HS_SECRET: &str = "room-service-bench-hs256-key-0123456789";
/// A throwaway RSA key pair (2048 bits) made for this benchmark only.
pub(crate) const RSA_PRIVATE_PEM: &str = "-----BEGIN PRIVATE KEY-----
MIIEvAIBADANBgkqhkiG9w0BAQEFAASCBKYwggSiAgEAAoIBAQCkdacbq2DZD+oI
DjxC9chRIzQnZ1KGx0lrY1XGcZaqb+S0xxMvQ43RfltsaW+qEfn5+Y/t/EyWX/ly
i8s+/JSWl+1BaGl/nSRFZb6vWqqHbafuD6AMfbNJ8xDQdvLELA2R3nx4IgKJo3yr
5p/yWf0hA78qvkxChbzYukDWPLPk1ruURc2s8os87n4h7OoR9kpoYjv6fEkbYuTE
FhwI/jcmKVGz/zAxLMNv7vIy72TNyXPjSnZh+o+YbICCh9OpdEcafoWRsOPxnuj9
Sg4+bNxxdv8qtUd+MAuo7mC2oDpaFHgyFJU7z5rjrxe3b8H7pa6T/WNvBe0V6Iyi
xWvpkWvpAgMBAAECggEADU3mR6cA1faDXoT2S41yF9xC9RgW9UfMcPdPglcAkwer
xxMewnFS2PqBn17VNXswT5BonB5PvM+FUMat2cnZpGgkfajadgQqocGWID3zszKE
Bg52CmSl2yridpbU01lj/KO0yowny+YxqP9me5bbky7oKWdNKImEqjzBD4PIItA6
GActXB2zXmN53upT7nt8SPtcNyT7G+lf83L/ssGfp77XMOtgfL6EDwQaP30XXf9A
K6qLh0FEzwzvwGw/P8gDw6WabGMShTorOx0b/BAAZn77OtakJraDeieno04MGnAE
FYq61CS/Wn0y4zA257sYV4t7pS/Rj9p82uyrPRXzTQKBgQDOhWG3ilVsiPwbir59
cpH75puHUmoiGRl9W7whgPHVtvVc4clgNzfHFbMidCM/rJQPixpSfGEpC4t4AQxh
PqskJUhfE0IHeo1KTrPiP2L6AZElBJm6b9zZSd/18ZdxtepEo83kKBcNSzoiNDNy
USQPOJ0MXgoalH5fh5fEr1B8lQKBgQDL3IDpnQ1J9nrzCw7aSga6SGGfIgHwsUOB
8wHKEG20h1uy38Z4MuLNtOs+6D8iBejEIr/OP0zXE81g2gnoBCQkK1Wa8q6BrE6Y
ToFbGltnscDnCa980JVdDEaYf5cWPM2TaaLW8HfvQSdCxo2oC0V3fXmDFTXfxp5B
LFfDRPbJBQKBgCjOF+mg7pH8WvvCJTM6MPf5r59EPG4yUWQAfSKNjLryZHaOsjBN
mLrAYd2b3t8U5UhQ7sl/g98NRehXJLAOJtiEeVE3x+McZtBYzpgUeCT3rEsJJqq8
sYFJZHP+4TJ5hCk9yE+dUDizNXBOqh+bQqmzQOyRpCNuVa3gZ69YCGolAoGAU08T
J2TU72rYp8XXFgG2ah32Nu/Q1ym5qrtB+e9oxaOjJ6AnHSu+X84VbKnAUwkTLEP/
GivoHOSsw22XKse2dUl4PE/8XGWr4LYEStSkkeWkLUZZ/qnGwDWqC9voRGAoqps6
vpeai52Wi8VUUl34z3HpXFYopAAo3/1dCCGAsHkCgYBgzyBMWIhHdMTL1O7IPrKO
bU8IJ4u7pJsOToKliOwdS5BCKiZI/VV9xXy/iuWwNP+MFRwKKXBY4eZgJVmokPPT
Z2ENCAWd8iRGUYImhR9GbUMU7rxPRZLgiUYJK+4GdMVZwoMhIOlpBTo6V6yh1YyZ
rrjnqB5cOWN6n1gPn0lFrQ==
-----END PRIVATE KEY-----
";
pub(crate) const RSA_PUBLIC_PEM: &str = "-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEApHWnG6tg2Q/qCA48QvXI
USM0J2dShsdJa2NVxnGWqm/ktMcTL0ON0X5bbGlvqhH5+fmP7fxMll/5covLPvyU
lpftQWhpf50kRWW+r1qqh22n7g+gDH2zSfMQ0HbyxCwNkd58eCICiaN8q+af8ln9
IQO/Kr5MQoW82LpA1jyz5Na7lEXNrPKLPO5+IezqEfZKaGI7+nxJG2LkxBYcCP43
JilRs/8wMSzDb+7yMu9kzclz40p2YfqPmGyAgofTqXRHGn6FkbDj8Z7o/UoOPmzc
cXb/KrVHfjALqO5gtqA6WhR4MhSVO8+a468Xt2/B+6Wuk/1jbwXtFeiMosVr6ZFr
6QIDAQAB
-----END PUBLIC KEY-----
";

/// The bearer token of each user of the plans.
pub(crate) struct Tokens(HashMap<String, String>);

impl Tokens {
    /// The token of `user`.
    pub(crate) fn of(&self, user: &str) -> Option<&str> {
        self.0.get(user).map(String::as_str)
    }
}

/// The user a command acts as.
pub(crate) fn actor(command: &Command) -> &str {
    match command {
        Command::CreateRoom { owner_id, .. } => owner_id.as_str(),
        Command::JoinRoom { user_id } | Command::LeaveRoom { user_id, .. } => user_id.as_str(),
        Command::SendGift { sender_id, .. } => sender_id.as_str(),
        // CloseRoom and the moderation commands: the plans' only actor of them is the owner.
        _ => "owner",
    }
}

/// A token for every user of `plans`, signed with `alg` (minted on the blocking pool).
async fn mint(alg: Algorithm, plans: &[Plan]) -> anyhow::Result<Tokens> {
    let mut users: Vec<String> = plans
        .iter()
        .flat_map(|(creates, timed)| creates.iter().chain(timed.iter().map(|(_, c)| c)))
        .map(|c| actor(c).to_owned())
        .collect();
    users.sort();
    users.dedup();
    let key = match alg {
        Algorithm::HS256 => EncodingKey::from_secret(HS_SECRET.as_bytes())?,
        _ => EncodingKey::from_rsa_pem(RSA_PRIVATE_PEM.as_bytes())?,
    };
    let exp = jsonwebtoken::get_current_timestamp() + 3600;
    let halves: Vec<Vec<String>> =
        users.chunks(users.len().div_ceil(2).max(1)).map(<[String]>::to_vec).collect();
    let mut tokens = HashMap::new();
    for half in join_all(halves.into_iter().map(|users| {
        let key = key.clone();
        tokio::task::spawn_blocking(move || {
            users
                .into_iter()
                .map(|user| {
                    let claims = json!({"sub": user, "exp": exp});
                    jsonwebtoken::encode(&Header::new(alg), &claims, &key).map(|token| (user, token))
                })
                .collect::<Result<Vec<_>, _>>()
        })
    }))
    .await
    {
        tokens.extend(half??);
    }
    Ok(Tokens(tokens))
}

/// The HS256 and RS256 runs, each beside the `none` run's commands/s (`none_rate`).
pub(super) async fn runs(
    args: &Args,
    db: &BenchDb,
    plans: &[Plan],
    none_rate: f64,
) -> anyhow::Result<Vec<Line>> {
    let key_file = std::env::temp_dir().join(format!("room-service-bench-{}.pem", std::process::id()));
    std::fs::write(&key_file, RSA_PUBLIC_PEM)?;
    let key_path = key_file.to_string_lossy().into_owned();
    let mut lines = Vec::new();
    for (alg, name, key) in [
        (Algorithm::HS256, "HS256", [("auth.jwt.algorithms", "HS256"), ("auth.jwt.secret", HS_SECRET)]),
        (
            Algorithm::RS256,
            "RS256",
            [("auth.jwt.algorithms", "RS256"), ("auth.jwt.public_key_file", key_path.as_str())],
        ),
    ] {
        let tokens = mint(alg, plans).await?;
        let mut overrides = vec![("auth.mode", "jwt")];
        overrides.extend_from_slice(&key);
        overrides.extend_from_slice(&NOT_BINDING);
        let run = service_run(args, db, plans.to_vec(), &overrides, Some(&tokens)).await?.run;
        let rate = run.n as f64 / run.elapsed.as_secs_f64();
        let ratio = rate / none_rate;
        let cost = (1.0 / rate - 1.0 / none_rate) * 1e6;
        lines.push(Line::new(
            &format!("B1 auth jwt {name}: commands/s (÷ none)"),
            format!("{rate:.0}/s"),
            format!("{none_rate:.0}/s auth.mode none; {cost:.0} µs more per command"),
            format!("{ratio:.2}"),
            "≥ 0.9",
            ratio >= 0.9,
        ));
        lines.push(Line::info(
            &format!("B1 auth jwt {name}: p50 / p99"),
            format!("{} / {}", ms(run.samples.pct(50.0)), ms(run.samples.pct(99.0))),
            format!(
                "CPU/command {:.0} µs bench process",
                run.cpu.this.as_secs_f64() * 1e6 / run.n.max(1) as f64
            ),
        ));
    }
    let _ = std::fs::remove_file(&key_file);
    Ok(lines)
}
