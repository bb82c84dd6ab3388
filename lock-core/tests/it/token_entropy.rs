//! Tokens carry 128 bits of entropy from the operating system's CSPRNG.
//!
//! Statistics can show that the bits look uniform and independent; they cannot tell a CSPRNG
//! from a good non-cryptographic generator (fastrand's wyrand passes all of these too), which
//! would let an attacker who saw a few tokens predict the next. So the last test pins the
//! source itself.

use std::collections::HashSet;

use lock_core::Token;

/// 2^16 draws: enough for a tight entropy estimate, a fraction of a second to make.
const DRAWS: usize = 1 << 16;

fn draws() -> Vec<[u8; 16]> {
    (0..DRAWS)
        .map(|_| *Token::generate().expect("os rng").as_bytes())
        .collect()
}

#[test]
fn every_byte_carries_eight_bits_so_a_token_carries_128() {
    let tokens = draws();
    let mut total_bits = 0.0_f64;
    for position in 0..16 {
        let mut counts = [0_u32; 256];
        for token in &tokens {
            counts[usize::from(token[position])] += 1;
        }
        #[allow(clippy::cast_precision_loss)] // counts and DRAWS are far below 2^52
        let n = DRAWS as f64;
        // Shannon entropy of the observed byte distribution (the plug-in estimate reads
        // ~0.003 bit low at this sample size: 255 / (2 n ln 2)).
        let entropy: f64 = counts
            .iter()
            .filter(|&&c| c > 0)
            .map(|&c| {
                let p = f64::from(c) / n;
                -p * p.log2()
            })
            .sum();
        // Chi-square against uniform, 255 degrees of freedom: mean 255, sd 22.6; 420 is
        // beyond 7 sd, so a fair source fails it about never, a skewed one at once.
        let expected = n / 256.0;
        let chi2: f64 = counts
            .iter()
            .map(|&c| (f64::from(c) - expected).powi(2) / expected)
            .sum();
        assert!(
            chi2 < 420.0,
            "byte {position} is not uniform: chi2 {chi2:.1}"
        );
        assert!(entropy > 7.99, "byte {position}: {entropy:.4} bits");
        total_bits += entropy;
    }
    // One stuck bit anywhere would cost a whole bit here.
    assert!(total_bits > 127.9, "a token carries {total_bits:.3} bits");
}

#[test]
fn neighbouring_bits_are_independent() {
    // Byte-wise entropy assumes the bytes' bits do not depend on each other; check each of the
    // 127 pairs of adjacent bits (across byte boundaries too): they differ half the time.
    let tokens = draws();
    let bit = |t: &[u8; 16], i: usize| (t[i / 8] >> (i % 8)) & 1;
    for i in 0..127 {
        let differ = tokens.iter().filter(|t| bit(t, i) != bit(t, i + 1)).count();
        // Binomial(2^16, 1/2): mean 32,768, sd 128; allow 6 sd.
        assert!(
            (32_768 - 768..=32_768 + 768).contains(&differ),
            "bits {i} and {} agree too often or too rarely: {differ}",
            i + 1
        );
    }
}

#[test]
fn tokens_never_repeat_even_across_threads() {
    // A generator with per-thread state seeded alike (the failure of forked or cloned PRNGs)
    // would repeat across threads; the OS source cannot.
    let per_thread: Vec<Vec<Token>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    (0..5_000)
                        .map(|_| Token::generate().expect("os rng"))
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("no panic"))
            .collect()
    });
    let mut seen = HashSet::new();
    for token in per_thread.into_iter().flatten() {
        assert!(seen.insert(token), "token {token} repeated");
    }
    assert_eq!(seen.len(), 20_000);
}

#[test]
fn the_source_is_the_operating_systems_csprng() {
    // `Token::generate` must draw from getrandom (the OS CSPRNG: getrandom(2) on Linux), never
    // from the fast userspace generator lock-core uses for backoff jitter.
    let source = include_str!("../../src/token.rs");
    let generate = source
        .split("pub fn generate()")
        .nth(1)
        .and_then(|rest| rest.split("\n    }\n").next())
        .expect("Token::generate is in src/token.rs");
    assert!(generate.contains("getrandom::fill"), "{generate}");
    assert!(!generate.contains("fastrand"), "{generate}");
    let manifest = include_str!("../../Cargo.toml");
    assert!(
        manifest.contains("getrandom"),
        "lock-core depends on getrandom"
    );
}
