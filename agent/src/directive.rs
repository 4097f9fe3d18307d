//! `# vf-simulate: error_rate=0.25` lines in a served config steer simulated nodes, so a test
//! can ship a "bad" canary version and see exactly the nodes running it report errors.

/// Settings a config may carry for simulated nodes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SimDirectives {
    /// Fraction of events reported as errors, in `[0, 1]`.
    pub error_rate: Option<f64>,
}

/// Reads every `# vf-simulate:` comment line; later lines win, malformed settings are ignored.
pub fn parse(config_yaml: &str) -> SimDirectives {
    let mut directives = SimDirectives::default();
    for line in config_yaml.lines() {
        let Some(comment) = line.trim_start().strip_prefix('#') else {
            continue;
        };
        let Some(settings) = comment.trim_start().strip_prefix("vf-simulate:") else {
            continue;
        };
        for setting in settings.split([',', ' ', '\t']).filter(|s| !s.is_empty()) {
            if let Some(("error_rate", value)) = setting.split_once('=') {
                if let Ok(rate) = value.trim().parse::<f64>() {
                    if (0.0..=1.0).contains(&rate) {
                        directives.error_rate = Some(rate);
                    }
                }
            }
        }
    }
    directives
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_rate_directive_is_read_from_a_comment_line() {
        let yaml = "sources:\n  in: {type: demo_logs}\n# vf-simulate: error_rate=0.25\n";
        assert_eq!(parse(yaml).error_rate, Some(0.25));
    }

    #[test]
    fn indented_directive_without_space_after_hash_is_read() {
        assert_eq!(parse("  #vf-simulate: error_rate=1").error_rate, Some(1.0));
    }

    #[test]
    fn config_without_directive_has_no_error_rate() {
        assert_eq!(parse("sources: {}\n# just a comment\n").error_rate, None);
    }

    #[test]
    fn directive_text_outside_a_comment_is_ignored() {
        assert_eq!(
            parse("name: 'vf-simulate: error_rate=0.5'").error_rate,
            None
        );
    }

    #[test]
    fn out_of_range_or_non_numeric_rates_are_ignored() {
        assert_eq!(parse("# vf-simulate: error_rate=1.5").error_rate, None);
        assert_eq!(parse("# vf-simulate: error_rate=lots").error_rate, None);
    }

    #[test]
    fn unknown_settings_beside_error_rate_do_not_hide_it() {
        let yaml = "# vf-simulate: latency_ms=5, error_rate=0.1";
        assert_eq!(parse(yaml).error_rate, Some(0.1));
    }
}
