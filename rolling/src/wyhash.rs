//! Customer buckets that match `Bun.hash`.
//!
//! Existing TypeScript services bucket customers with `Bun.hash(customerId) % 100`. `Bun.hash`
//! is Zig's `std.hash.Wyhash` with seed 0, which is wyhash "final" version 4 (the same secret
//! constants and the same one-shot algorithm as `Wyhash.hash` in Zig's
//! `lib/std/hash/wyhash.zig`). Reproducing it bit for bit keeps every customer in the same
//! bucket whichever side of the migration evaluates the rollout.

/// The four secret constants of wyhash final v4 (`secret` in Zig's `Wyhash`).
const SECRET: [u64; 4] = [
    0xa076_1d64_78bd_642f,
    0xe703_7ed1_a0b4_28db,
    0x8ebc_6af0_9c88_c6e3,
    0x5899_65cc_7537_4cc3,
];

/// Number of buckets customers are spread over; a rollout percent is a bucket threshold.
pub const BUCKETS: u8 = 100;

/// 128-bit multiply, returning (low, high) halves (`mum` in Zig).
fn mum(a: u64, b: u64) -> (u64, u64) {
    let product = u128::from(a) * u128::from(b);
    (product as u64, (product >> 64) as u64)
}

/// Multiply and fold the halves together (`mix` in Zig).
fn mix(a: u64, b: u64) -> u64 {
    let (low, high) = mum(a, b);
    low ^ high
}

/// Little-endian 8-byte read at `at`; callers guarantee `at + 8 <= bytes.len()`.
fn read8(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// Little-endian 4-byte read at `at`; callers guarantee `at + 4 <= bytes.len()`.
fn read4(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u64::from(u32::from_le_bytes(word))
}

/// Wyhash final v4 with an explicit seed, exactly as Zig's `std.hash.Wyhash.hash(seed, bytes)`.
///
/// Exposed with a seed so the Zig/wyhash reference vectors (which use seeds 0..=6 and the
/// SMHasher verification code) can be checked; bucketing always uses seed 0 via [`bun_hash`].
pub fn wyhash(seed: u64, bytes: &[u8]) -> u64 {
    let len = bytes.len();
    let mut state = seed ^ mix(seed ^ SECRET[0], SECRET[1]);

    let (a, b) = if len <= 16 {
        if len >= 4 {
            let end = len - 4;
            let quarter = (len >> 3) << 2;
            (
                (read4(bytes, 0) << 32) | read4(bytes, quarter),
                (read4(bytes, end) << 32) | read4(bytes, end - quarter),
            )
        } else if len > 0 {
            (
                (u64::from(bytes[0]) << 16)
                    | (u64::from(bytes[len >> 1]) << 8)
                    | u64::from(bytes[len - 1]),
                0,
            )
        } else {
            (0, 0)
        }
    } else {
        let mut i = 0;
        if len >= 48 {
            // Zig keeps three lanes for whole 48-byte blocks, always leaving 1..=48 bytes
            // (never zero) for the 16-byte tail loop below: a length that is a multiple of 48
            // runs its last block through that loop instead of through a round.
            let mut lanes = [state; 3];
            while i + 48 < len {
                for (lane_index, lane) in lanes.iter_mut().enumerate() {
                    let lane_a = read8(bytes, i + 16 * lane_index);
                    let lane_b = read8(bytes, i + 16 * lane_index + 8);
                    *lane = mix(lane_a ^ SECRET[lane_index + 1], lane_b ^ *lane);
                }
                i += 48;
            }
            state = lanes[0] ^ lanes[1] ^ lanes[2];
        }
        let tail = &bytes[i..];
        let mut j = 0;
        while j + 16 < tail.len() {
            state = mix(read8(tail, j) ^ SECRET[1], read8(tail, j + 8) ^ state);
            j += 16;
        }
        // The last 16 bytes of the whole input, which may overlap bytes already mixed.
        (read8(bytes, len - 16), read8(bytes, len - 8))
    };

    let (a, b) = mum(a ^ SECRET[1], b ^ state);
    mix(a ^ SECRET[0] ^ len as u64, b ^ SECRET[1])
}

/// `Bun.hash(bytes)`: Wyhash with seed 0.
pub fn bun_hash(bytes: &[u8]) -> u64 {
    wyhash(0, bytes)
}

/// The customer's bucket, 0..=99: `Bun.hash(customerId) % 100` over the UTF-8 bytes, computed
/// on the full u64 (not on a JavaScript number, which would lose precision).
pub fn bucket(customer_id: &str) -> u8 {
    // The remainder is < 100, so the narrowing cannot lose anything.
    (bun_hash(customer_id.as_bytes()) % u64::from(BUCKETS)) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Zig's `lib/std/hash/wyhash.zig` vectors (taken by Zig from wyhash's `test_vector.cpp`),
    /// one per input-length class: 0, 1-3, 4-16, 17-48, and more than 48 bytes.
    const ZIG_VECTORS: [(u64, u64, &str); 7] = [
        (0, 0x0409_638e_e2bd_e459, ""),
        (1, 0xa841_2d09_1b5f_e0a9, "a"),
        (2, 0x32dd_92e4_b291_5153, "abc"),
        (3, 0x8619_1240_89a3_a16b, "message digest"),
        (4, 0x7a43_afb6_1d7f_5f40, "abcdefghijklmnopqrstuvwxyz"),
        (
            5,
            0xff42_329b_90e5_0d58,
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
        ),
        (
            6,
            0xc39c_ab13_b115_aad3,
            "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
        ),
    ];

    #[test]
    fn zig_wyhash_test_vectors_are_reproduced() {
        for (seed, expected, input) in ZIG_VECTORS {
            assert_eq!(
                wyhash(seed, input.as_bytes()),
                expected,
                "seed {seed}, input {input:?}"
            );
        }
    }

    /// Zig's `verify.smhasher`: hash keys {}, {0}, {0,1}, ... {0..254} with seed 256 - len,
    /// concatenate the little-endian hashes and hash that with seed 0; the low 32 bits are the
    /// SMHasher verification code. This covers every length 0..=255, including the multiples
    /// of 48 (48, 96, 144, 192, 240) where the last block takes the tail path.
    #[test]
    fn smhasher_verification_code_matches_zig() {
        let mut key = [0u8; 256];
        let mut all = Vec::with_capacity(256 * 8);
        for len in 0..256usize {
            key[len] = len as u8;
            let hash = wyhash(256 - len as u64, &key[..len]);
            all.extend_from_slice(&hash.to_le_bytes());
        }
        assert_eq!(wyhash(0, &all) as u32, 0xBD5E_840C);
    }

    #[test]
    fn empty_id_hashes_like_bun_and_lands_in_bucket_81() {
        assert_eq!(bun_hash(b""), 0x0409_638e_e2bd_e459);
        assert_eq!(bucket(""), 81);
    }

    #[test]
    fn known_customer_ids_land_in_the_buckets_bun_gives_them() {
        assert_eq!(bun_hash(b"cus_abc123"), 0xc635_5672_4b18_2fbf);
        assert_eq!(bucket("cus_abc123"), 63);
        assert_eq!(bun_hash(b"cus_1"), 0xa088_6a7d_cd64_3b1f);
        assert_eq!(bucket("cus_1"), 47);
        assert_eq!(bun_hash(b"cus_test_1"), 0x195a_966b_12e5_e338);
        assert_eq!(bucket("cus_test_1"), 12);
    }

    #[test]
    fn lengths_around_block_boundaries_and_multiples_of_48_hash_like_bun() {
        // Recorded from Bun 1.4.5: `Bun.hash(ALPHABET.repeat(10).slice(0, len))`.
        const ALPHABET: &str = "abcdefghijklmnopqrstuvwxyz0123456789";
        let text = ALPHABET.repeat(10);
        let cases: [(usize, u64); 10] = [
            (16, 0xcfcc_03b3_5e1e_cf15),
            (17, 0xbb32_4a4c_7dc9_229b),
            (47, 0x4e03_3c50_67c2_d263),
            (48, 0x6c12_e8bf_84a2_a74a),
            (49, 0x165a_4eb5_f161_bce0),
            (95, 0xd341_4338_df1f_16b3),
            (96, 0x1a46_d251_0ef8_fad1),
            (97, 0xb427_1bcd_730c_68a0),
            (144, 0xca85_ab8a_fa60_a408),
            (145, 0x2e1c_84ad_bd7e_9f07),
        ];
        for (len, expected) in cases {
            assert_eq!(bun_hash(&text.as_bytes()[..len]), expected, "length {len}");
        }
    }

    #[test]
    fn bucket_hashes_the_utf8_bytes_of_the_id() {
        let id = "cus_ñandú_🦀";
        assert_eq!(
            u64::from(bucket(id)),
            bun_hash(id.as_bytes()) % u64::from(BUCKETS)
        );
    }

    #[test]
    fn every_bucket_is_below_100() {
        for i in 0..2000 {
            assert!(bucket(&format!("cus_{i}")) < BUCKETS);
        }
    }
}
