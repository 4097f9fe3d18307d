//! What an environment allows now: a stopped line, and freeze windows.
//!
//! An admin **stops the line** of an environment: every in-flight release there pauses and
//! stays paused, and new releases and direct deploys are refused, until the line is lifted.
//! Nobody overrides a stopped line; it is lifted.
//!
//! A **freeze window** is a recurring weekly span ("Fri 16:00 - Mon 08:00 Europe/Berlin") or
//! a one-off range ("2026-12-24 00:00 - 2026-12-27 08:00 Europe/Berlin", or whole days
//! "2026-12-24 - 2026-12-27 Europe/Berlin"), read in its named time zone: "Fri 16:00" is
//! 16:00 on the wall clocks of Berlin, summer or winter. While one is open, the scheduler
//! does not advance or complete a release (a stage that passes is held for an operator,
//! [`hold_back`]), and new releases, direct deploys, advance and complete are refused unless
//! an admin overrides with a reason. Rolling back is always allowed, and checks during a
//! bake still roll back a failing canary.
//!
//! Time arrives as unix milliseconds; zones come from the tz database compiled into the
//! binary (jiff's bundled copy), so a server behaves the same on every host.

use std::fmt;

use jiff::civil::{Date, DateTime, Time, Weekday};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan, Zoned};
use serde::{Deserialize, Serialize};

use crate::release::Decision;

/// Longest text of a freeze window.
pub const MAX_WINDOW_CHARS: usize = 200;

/// A freeze window as parsed from its text.
#[derive(Debug, Clone, PartialEq)]
pub struct FreezeWindow {
    span: Span,
    tz: TimeZone,
    tz_name: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Span {
    /// Every week from `from` to `to` (wall-clock times; `to` may fall in the next week).
    Weekly {
        from: (Weekday, Time),
        to: (Weekday, Time),
    },
    /// Once, from `from` to `to` (wall-clock date-times). `whole_days` keeps the text as the
    /// operator wrote it: "2026-12-24 - 2026-12-27" ends at the start of the 28th.
    Once {
        from: DateTime,
        to: DateTime,
        whole_days: bool,
    },
}

const EXAMPLES: &str =
    "'Fri 16:00 - Mon 08:00 Europe/Berlin' or '2026-12-24 00:00 - 2026-12-27 08:00 Europe/Berlin'";

impl FreezeWindow {
    /// Reads "Fri 16:00 - Mon 08:00 Europe/Berlin", "2026-12-24 00:00 - 2026-12-27 08:00 UTC"
    /// or "2026-12-24 - 2026-12-27 Europe/Berlin". The error says what is wrong, for the
    /// caller to put beside the field.
    pub fn parse(text: &str) -> Result<FreezeWindow, String> {
        let text = text.trim();
        if text.chars().count() > MAX_WINDOW_CHARS {
            return Err(format!("at most {MAX_WINDOW_CHARS} characters"));
        }
        let (start, rest) = text
            .split_once(" - ")
            .ok_or_else(|| format!("expected {EXAMPLES}"))?;
        let mut words: Vec<&str> = rest.split_whitespace().collect();
        let tz_name = words
            .pop()
            .filter(|_| !words.is_empty())
            .ok_or_else(|| format!("ends with a time zone, as in {EXAMPLES}"))?;
        if tz_name.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(format!("ends with a time zone, as in {EXAMPLES}"));
        }
        let tz = TimeZone::get(tz_name).map_err(|_| {
            format!("unknown time zone {tz_name:?}: use a name such as Europe/Berlin or UTC")
        })?;
        let end: Vec<&str> = words;
        let start: Vec<&str> = start.split_whitespace().collect();
        let span = match (start.as_slice(), end.as_slice()) {
            ([day_a, time_a], [day_b, time_b]) if weekday(day_a).is_some() => Span::Weekly {
                from: (weekday_or(day_a)?, clock(time_a)?),
                to: (weekday_or(day_b)?, clock(time_b)?),
            },
            ([date_a, time_a], [date_b, time_b]) => Span::Once {
                from: date(date_a)?.to_datetime(clock(time_a)?),
                to: date(date_b)?.to_datetime(clock(time_b)?),
                whole_days: false,
            },
            ([date_a], [date_b]) => Span::Once {
                from: date(date_a)?.to_datetime(Time::midnight()),
                to: (date(date_b)?.tomorrow())
                    .map_err(|_| format!("{date_b} is out of range"))?
                    .to_datetime(Time::midnight()),
                whole_days: true,
            },
            _ => return Err(format!("expected {EXAMPLES}")),
        };
        match &span {
            Span::Weekly { from, to } if from == to => {
                return Err("starts and ends at the same time: a window needs a length".into())
            }
            Span::Once { from, to, .. } if to <= from => return Err("ends before it starts".into()),
            _ => {}
        }
        Ok(FreezeWindow {
            span,
            tz,
            tz_name: tz_name.to_owned(),
        })
    }

    /// When this window closes, if it is open at `now`.
    pub fn open_until(&self, now: i64) -> Option<i64> {
        let local = zoned(now, &self.tz)?;
        match &self.span {
            Span::Weekly { from, to } => {
                let at = minute_of_week(local.weekday(), local.time());
                let (start, end) = (minute_of_week(from.0, from.1), minute_of_week(to.0, to.1));
                let open = if start < end {
                    start <= at && at < end
                } else {
                    at >= start || at < end
                };
                open.then(|| self.next_wall_clock(&local, *to))?
            }
            Span::Once { from, to, .. } => {
                let (from, to) = (self.instant(*from)?, self.instant(*to)?);
                (from <= now && now < to).then_some(to)
            }
        }
    }

    /// The first instant after `local` at which the wall clock reads `at` (a time skipped
    /// by a DST change counts as the instant after the gap).
    fn next_wall_clock(&self, local: &Zoned, at: (Weekday, Time)) -> Option<i64> {
        let today = local.date();
        let days_ahead = i64::from(at.0.since(today.weekday()));
        let mut day = today.checked_add(days_ahead.days()).ok()?;
        if days_ahead == 0 && at.1 <= local.time() {
            day = day.checked_add(7.days()).ok()?;
        }
        self.instant(day.to_datetime(at.1))
    }

    /// The instant a wall-clock date-time of this zone names: the earlier of two in a DST
    /// fold, the instant after a DST gap.
    fn instant(&self, at: DateTime) -> Option<i64> {
        let zoned = self.tz.to_ambiguous_zoned(at).compatible().ok()?;
        Some(zoned.timestamp().as_millisecond())
    }

    /// `at` on this window's wall clocks, as the banner shows it: "Mon 7 Dec 08:00
    /// Europe/Berlin".
    pub fn wall_clock(&self, at: i64) -> String {
        match zoned(at, &self.tz) {
            Some(z) => format!(
                "{} {} {} {:02}:{:02} {}",
                short_day(z.weekday()),
                z.day(),
                MONTHS[usize::try_from(z.month() - 1).unwrap_or(0)],
                z.hour(),
                z.minute(),
                self.tz_name
            ),
            None => format!("{at} ms"),
        }
    }
}

/// The canonical text, which [`FreezeWindow::parse`] reads back to the same window.
impl fmt::Display for FreezeWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hm = |t: &Time| format!("{:02}:{:02}", t.hour(), t.minute());
        match &self.span {
            Span::Weekly { from, to } => write!(
                f,
                "{} {} - {} {} {}",
                short_day(from.0),
                hm(&from.1),
                short_day(to.0),
                hm(&to.1),
                self.tz_name
            ),
            Span::Once {
                from,
                to,
                whole_days: true,
            } => {
                let last = to.date().yesterday().unwrap_or(to.date());
                write!(f, "{} - {} {}", from.date(), last, self.tz_name)
            }
            Span::Once { from, to, .. } => write!(
                f,
                "{} {} - {} {} {}",
                from.date(),
                hm(&from.time()),
                to.date(),
                hm(&to.time()),
                self.tz_name
            ),
        }
    }
}

/// An open freeze: which window (its index in the list given), and when the freeze ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFreeze {
    pub window: usize,
    /// The end of the freeze: windows that overlap or touch are one freeze.
    pub until: i64,
}

/// The freeze open at `now`, if any. Windows that overlap or touch chain: a freeze ends when
/// no window is open any more.
pub fn open_freeze(windows: &[FreezeWindow], now: i64) -> Option<OpenFreeze> {
    let (window, mut until) = (windows.iter().enumerate())
        .filter_map(|(i, w)| Some((i, w.open_until(now)?)))
        .max_by_key(|(_, until)| *until)?;
    // Bounded: each step moves `until` strictly later, and a window list is short.
    for _ in 0..windows.len() {
        match windows.iter().filter_map(|w| w.open_until(until)).max() {
            Some(later) if later > until => until = later,
            _ => break,
        }
    }
    Some(OpenFreeze { window, until })
}

/// Who stopped the line, when and why. Stored on the environment while stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LineStop {
    pub at: i64,
    pub by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A change to what an environment's nodes run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    NewRelease,
    DirectDeploy,
    Advance,
    Complete,
    Resume,
    Rollback,
}

impl Change {
    fn doing(self) -> &'static str {
        match self {
            Change::NewRelease => "start a release",
            Change::DirectDeploy => "deploy directly",
            Change::Advance => "advance",
            Change::Complete => "complete",
            Change::Resume => "resume",
            Change::Rollback => "roll back",
        }
    }
}

/// What holds an environment now, as the banner and the refusals word it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    pub line: Option<LineStop>,
    /// The open freeze: its window's text, the window's own reason, and its end in the
    /// window's wall-clock words.
    pub freeze: Option<FreezeNow>,
}

/// An open freeze as people read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreezeNow {
    pub window: String,
    pub reason: Option<String>,
    pub until: i64,
    pub until_text: String,
}

impl FreezeNow {
    /// The open freeze among `windows` (each with its reason) at `now`.
    pub fn at(windows: &[(FreezeWindow, Option<String>)], now: i64) -> Option<FreezeNow> {
        let parsed: Vec<FreezeWindow> = windows.iter().map(|(w, _)| w.clone()).collect();
        let open = open_freeze(&parsed, now)?;
        let (window, reason) = &windows[open.window];
        Some(FreezeNow {
            window: window.to_string(),
            reason: reason.clone(),
            until: open.until,
            until_text: window.wall_clock(open.until),
        })
    }
}

/// Why an environment refused a change; shown to the operator as is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HoldRefusal {
    #[error("cannot {doing}: the line of {env} is stopped{by}; an admin lifts it first")]
    LineStopped {
        doing: &'static str,
        env: String,
        by: String,
    },
    #[error("cannot {doing}: {env} is frozen ({window}{reason}) until {until}; an admin may override with a reason")]
    Frozen {
        doing: &'static str,
        env: String,
        window: String,
        reason: String,
        until: String,
    },
}

/// Whether `change` may happen in environment `env` held by `hold`. Rollback always may.
/// `admin_override` (an admin's reason given) lets a change through a freeze, never through
/// a stopped line.
pub fn allow(
    env: &str,
    hold: &Hold,
    change: Change,
    admin_override: bool,
) -> Result<(), HoldRefusal> {
    if change == Change::Rollback {
        return Ok(());
    }
    if let Some(line) = &hold.line {
        return Err(HoldRefusal::LineStopped {
            doing: change.doing(),
            env: env.to_owned(),
            by: said_by(&line.by, line.reason.as_deref()),
        });
    }
    match &hold.freeze {
        Some(freeze) if !admin_override && change != Change::Resume => Err(HoldRefusal::Frozen {
            doing: change.doing(),
            env: env.to_owned(),
            window: freeze.window.clone(),
            reason: (freeze.reason.as_deref())
                .map(|r| format!(": {r}"))
                .unwrap_or_default(),
            until: freeze.until_text.clone(),
        }),
        _ => Ok(()),
    }
}

fn said_by(by: &str, reason: Option<&str>) -> String {
    match reason {
        Some(reason) => format!(" by {by}: {reason}"),
        None => format!(" by {by}"),
    }
}

/// The scheduler's decision at a bake deadline during a freeze: a stage that passed is held
/// for an operator instead of advancing or completing; a hold or rollback stands.
pub fn hold_back(decision: Decision, stage_index: usize, freeze: Option<&FreezeNow>) -> Decision {
    match (decision, freeze) {
        (Decision::StartStage(_) | Decision::Complete, Some(freeze)) => Decision::Hold {
            reason: format!(
                "stage {} passed; not going on during the freeze {} (until {}): an operator continues it",
                stage_index + 1,
                freeze.window,
                freeze.until_text
            ),
        },
        (decision, _) => decision,
    }
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

fn zoned(at: i64, tz: &TimeZone) -> Option<Zoned> {
    Some(Timestamp::from_millisecond(at).ok()?.to_zoned(tz.clone()))
}

fn minute_of_week(day: Weekday, time: Time) -> i32 {
    i32::from(day.to_monday_zero_offset()) * 24 * 60
        + i32::from(time.hour()) * 60
        + i32::from(time.minute())
}

fn short_day(day: Weekday) -> &'static str {
    match day {
        Weekday::Monday => "Mon",
        Weekday::Tuesday => "Tue",
        Weekday::Wednesday => "Wed",
        Weekday::Thursday => "Thu",
        Weekday::Friday => "Fri",
        Weekday::Saturday => "Sat",
        Weekday::Sunday => "Sun",
    }
}

fn weekday(word: &str) -> Option<Weekday> {
    let word = word.to_ascii_lowercase();
    let days = [
        Weekday::Monday,
        Weekday::Tuesday,
        Weekday::Wednesday,
        Weekday::Thursday,
        Weekday::Friday,
        Weekday::Saturday,
        Weekday::Sunday,
    ];
    let full = [
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ];
    (days.into_iter().zip(full))
        .find_map(|(day, name)| (word == name || word == name[..3]).then_some(day))
}

fn weekday_or(word: &str) -> Result<Weekday, String> {
    weekday(word).ok_or_else(|| format!("{word:?} is not a day of the week (Mon ... Sun)"))
}

fn clock(word: &str) -> Result<Time, String> {
    let bad = || format!("{word:?} is not a time of day (HH:MM, 00:00 to 23:59)");
    let (h, m) = word.split_once(':').ok_or_else(bad)?;
    if m.len() != 2 {
        return Err(bad());
    }
    let (h, m): (i8, i8) = (h.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
    if !(0..24).contains(&h) || !(0..60).contains(&m) {
        return Err(bad());
    }
    Time::new(h, m, 0, 0).map_err(|_| bad())
}

fn date(word: &str) -> Result<Date, String> {
    word.parse::<Date>()
        .ok()
        .filter(|_| word.len() == 10)
        .ok_or_else(|| format!("{word:?} is not a date (YYYY-MM-DD)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unix milliseconds of a UTC wall-clock time.
    fn utc(text: &str) -> i64 {
        let dt: DateTime = text.parse().expect("a date-time");
        dt.to_zoned(TimeZone::UTC)
            .expect("in range")
            .timestamp()
            .as_millisecond()
    }

    fn window(text: &str) -> FreezeWindow {
        FreezeWindow::parse(text).expect("parses")
    }

    #[test]
    fn reads_weekly_once_and_whole_day_windows_and_writes_them_back() {
        for text in [
            "Fri 16:00 - Mon 08:00 Europe/Berlin",
            "2026-12-24 00:00 - 2026-12-27 08:00 Europe/Berlin",
            "2026-12-24 - 2026-12-27 UTC",
        ] {
            assert_eq!(window(text).to_string(), text);
        }
        assert_eq!(
            window("friday 16:00 - monday 8:00  UTC").to_string(),
            "Fri 16:00 - Mon 08:00 UTC"
        );
    }

    #[test]
    fn refuses_what_it_cannot_read_saying_what() {
        let err = |text: &str| FreezeWindow::parse(text).expect_err(text);
        assert!(err("Fri 16:00 Mon 08:00 UTC").contains("expected"));
        assert!(err("Fri 16:00 - Mon 08:00").contains("ends with a time zone"));
        assert!(err("Fri 16:00 - Mon 08:00 Mars/Olympus").contains("unknown time zone"));
        assert!(err("Fri 25:00 - Mon 08:00 UTC").contains("not a time of day"));
        assert!(err("Fri 16:00 - Xyz 08:00 UTC").contains("not a day of the week"));
        assert!(err("2026-12-27 - 2026-12-24 UTC").contains("ends before it starts"));
        assert!(err("2026-02-30 - 2026-03-01 UTC").contains("not a date"));
        assert!(err("Fri 16:00 - Fri 16:00 UTC").contains("needs a length"));
    }

    #[test]
    fn a_weekly_window_wraps_over_the_weekend_and_says_when_it_ends() {
        // Europe/Berlin in December is UTC+1.
        let w = window("Fri 16:00 - Mon 08:00 Europe/Berlin");
        // Fri 2026-12-04 14:59 UTC is 15:59 in Berlin: not yet.
        assert_eq!(w.open_until(utc("2026-12-04T14:59")), None);
        let monday_8 = utc("2026-12-07T07:00");
        assert_eq!(w.open_until(utc("2026-12-04T15:00")), Some(monday_8));
        assert_eq!(w.open_until(utc("2026-12-06T12:00")), Some(monday_8));
        assert_eq!(w.open_until(monday_8 - 1), Some(monday_8));
        assert_eq!(w.open_until(monday_8), None);
        assert_eq!(w.wall_clock(monday_8), "Mon 7 Dec 08:00 Europe/Berlin");
    }

    #[test]
    fn a_weekly_window_follows_the_wall_clock_across_a_dst_change() {
        // Summer time starts in Berlin on Sunday 2026-03-29 (02:00 -> 03:00): the window
        // ends at 08:00 Berlin time, which is 07:00 UTC before and 06:00 UTC after.
        let w = window("Fri 16:00 - Mon 08:00 Europe/Berlin");
        assert_eq!(
            w.open_until(utc("2026-03-28T12:00")),
            Some(utc("2026-03-30T06:00"))
        );
        assert_eq!(w.open_until(utc("2026-03-30T06:30")), None);
        // The week before, 06:30 UTC was still 07:30 in Berlin: frozen.
        assert_eq!(
            w.open_until(utc("2026-03-23T06:30")),
            Some(utc("2026-03-23T07:00"))
        );
        // It opened at 16:00 Berlin on Friday 27 March, 15:00 UTC (still winter time).
        assert_eq!(w.open_until(utc("2026-03-27T14:59")), None);
        assert!(w.open_until(utc("2026-03-27T15:00")).is_some());
    }

    #[test]
    fn a_window_in_a_dst_gap_opens_after_the_gap() {
        // 02:30 does not exist in Berlin on 2026-03-29: the window opens at 03:00 CEST.
        let w = window("Sun 02:30 - Sun 05:00 Europe/Berlin");
        assert_eq!(w.open_until(utc("2026-03-29T00:59")), None);
        assert_eq!(
            w.open_until(utc("2026-03-29T01:00")),
            Some(utc("2026-03-29T03:00"))
        );
    }

    #[test]
    fn a_one_off_window_is_open_between_its_ends_in_its_zone() {
        let w = window("2026-12-24 - 2026-12-27 Europe/Berlin");
        let start = utc("2026-12-23T23:00");
        let end = utc("2026-12-27T23:00");
        assert_eq!(w.open_until(start - 1), None);
        assert_eq!(w.open_until(start), Some(end));
        assert_eq!(w.open_until(end), None);
    }

    #[test]
    fn touching_windows_are_one_freeze() {
        let windows = [
            window("Fri 16:00 - Sat 00:00 UTC"),
            window("Sat 00:00 - Mon 08:00 UTC"),
            window("Wed 10:00 - Wed 11:00 UTC"),
        ];
        let open = open_freeze(&windows, utc("2026-12-04T17:00")).expect("open");
        assert_eq!(open.window, 0);
        assert_eq!(open.until, utc("2026-12-07T08:00"));
        assert_eq!(open_freeze(&windows, utc("2026-12-07T08:00")), None);
    }

    fn frozen() -> Hold {
        Hold {
            line: None,
            freeze: Some(FreezeNow {
                window: "Fri 16:00 - Mon 08:00 UTC".into(),
                reason: Some("weekend".into()),
                until: 0,
                until_text: "Mon 7 Dec 08:00 UTC".into(),
            }),
        }
    }

    #[test]
    fn a_freeze_refuses_changes_unless_an_admin_overrides_and_always_allows_rollback() {
        let hold = frozen();
        let refused = allow("production", &hold, Change::NewRelease, false).expect_err("frozen");
        assert_eq!(
            refused.to_string(),
            "cannot start a release: production is frozen (Fri 16:00 - Mon 08:00 UTC: weekend) \
             until Mon 7 Dec 08:00 UTC; an admin may override with a reason"
        );
        assert!(allow("production", &hold, Change::Complete, false).is_err());
        assert!(allow("production", &hold, Change::NewRelease, true).is_ok());
        assert!(allow("production", &hold, Change::Rollback, false).is_ok());
        assert!(allow("production", &hold, Change::Resume, false).is_ok());
    }

    #[test]
    fn a_stopped_line_refuses_everything_but_rollback_even_an_override() {
        let hold = Hold {
            line: Some(LineStop {
                at: 0,
                by: "ann".into(),
                reason: Some("incident 42".into()),
            }),
            freeze: None,
        };
        let refused = allow("production", &hold, Change::DirectDeploy, true).expect_err("stopped");
        assert_eq!(
            refused.to_string(),
            "cannot deploy directly: the line of production is stopped by ann: incident 42; \
             an admin lifts it first"
        );
        assert!(allow("production", &hold, Change::Resume, true).is_err());
        assert!(allow("production", &hold, Change::Rollback, false).is_ok());
    }

    #[test]
    fn a_passing_stage_is_held_during_a_freeze_and_a_failing_one_still_rolls_back() {
        let freeze = frozen().freeze;
        let held = hold_back(Decision::StartStage(1), 0, freeze.as_ref());
        assert!(
            matches!(&held, Decision::Hold { reason } if reason.starts_with("stage 1 passed; not going on during the freeze")),
            "{held:?}"
        );
        assert!(matches!(
            hold_back(Decision::Complete, 2, freeze.as_ref()),
            Decision::Hold { .. }
        ));
        let rollback = Decision::Rollback {
            reason: "bad".into(),
        };
        assert_eq!(hold_back(rollback.clone(), 0, freeze.as_ref()), rollback);
        assert_eq!(hold_back(Decision::Complete, 0, None), Decision::Complete);
    }
}
