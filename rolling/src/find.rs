//! Finding test customers whose ids land in a given bucket range.

use crate::bucket;

/// How many `cus_test_{i}` ids are tried; far more than needed to hit every bucket.
const SEARCH_LIMIT: u32 = 10_000;

/// The first id `cus_test_{i}` (i = 0, 1, ...) whose bucket is in `min..=max` (inclusive, unlike
/// the original TypeScript helper's half-open range), so tests can put a customer on a chosen
/// side of a rollout boundary. Deterministic: the same range always gives the same id.
///
/// `None` for an empty or impossible range (`min > max`, or `min` above 99).
pub fn find_customer_in_bucket_range(min: u8, max: u8) -> Option<String> {
    if min > max {
        return None;
    }
    (0..SEARCH_LIMIT)
        .map(|i| format!("cus_test_{i}"))
        .find(|id| (min..=max).contains(&bucket(id)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_single_bucket_has_a_test_customer() {
        for target in 0..100u8 {
            let id = find_customer_in_bucket_range(target, target).unwrap();
            assert_eq!(bucket(&id), target, "{id}");
        }
    }

    #[test]
    fn the_found_customer_is_inside_the_inclusive_range() {
        let id = find_customer_in_bucket_range(20, 49).unwrap();
        assert!((20..=49).contains(&bucket(&id)));
    }

    #[test]
    fn the_search_is_deterministic_and_starts_from_cus_test_0() {
        assert_eq!(
            find_customer_in_bucket_range(0, 99).as_deref(),
            Some("cus_test_0")
        );
        // cus_test_1 is in bucket 12.
        assert_eq!(
            find_customer_in_bucket_range(12, 12),
            find_customer_in_bucket_range(12, 12)
        );
        assert_eq!(bucket("cus_test_1"), 12);
    }

    #[test]
    fn empty_or_impossible_ranges_find_nobody() {
        assert_eq!(find_customer_in_bucket_range(50, 10), None);
        assert_eq!(find_customer_in_bucket_range(100, 200), None);
    }

    #[test]
    fn a_range_reaching_past_99_still_finds_customers_below_it() {
        let id = find_customer_in_bucket_range(95, 255).unwrap();
        assert!(bucket(&id) >= 95);
    }
}
