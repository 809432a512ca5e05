//! A timeline of the prover's stages (which worker or device did what, when), written as a
//! Chrome / Perfetto trace so that overlap between CPU and GPU work can be seen and measured.

use std::io::{self, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One stage: `name` ran on `lane` (a CPU thread, a device) from `start` to `end`, measured
/// from the timeline's creation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    pub lane: String,
    pub name: String,
    pub start: Duration,
    pub end: Duration,
}

/// Where some spans of a timeline fall: from the first one's start to the last end, and the
/// time at least one of them ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coverage {
    pub first: Duration,
    pub last: Duration,
    pub covered: Duration,
}

impl Coverage {
    pub fn span(&self) -> Duration {
        self.last - self.first
    }

    /// The share of the span covered, 0 to 1.
    pub fn share(&self) -> f64 {
        self.covered.as_secs_f64() / self.span().as_secs_f64().max(1e-9)
    }
}

/// Spans recorded from any thread.
#[derive(Debug)]
pub struct Timeline {
    origin: Instant,
    spans: Mutex<Vec<Span>>,
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline {
            origin: Instant::now(),
            spans: Mutex::new(Vec::new()),
        }
    }
}

impl Timeline {
    pub fn new() -> Self {
        Self::default()
    }

    /// Time since the timeline began.
    pub fn elapsed(&self) -> Duration {
        self.origin.elapsed()
    }

    /// Runs `f`, recording it as `name` on `lane`.
    pub fn record<T>(&self, lane: &str, name: &str, f: impl FnOnce() -> T) -> T {
        let start = self.origin.elapsed();
        let value = f();
        let end = self.origin.elapsed();
        self.spans
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Span {
                lane: lane.to_string(),
                name: name.to_string(),
                start,
                end,
            });
        value
    }

    /// Every span so far, by start time.
    pub fn spans(&self) -> Vec<Span> {
        let mut spans = self.spans.lock().unwrap_or_else(|e| e.into_inner()).clone();
        spans.sort_by_key(|s| s.start);
        spans
    }

    /// Where the spans `keep` selects fall, `None` where it selects none.
    pub fn coverage(&self, keep: impl Fn(&Span) -> bool) -> Option<Coverage> {
        let spans = self.spans();
        let mut kept = spans.iter().filter(|s| keep(s));
        let first = kept.next()?;
        let mut coverage = Coverage {
            first: first.start,
            last: first.end,
            covered: first.end - first.start,
        };
        // By start: each span covers what it reaches past those before it.
        for span in kept {
            if span.end > coverage.last {
                coverage.covered += span.end - span.start.max(coverage.last);
                coverage.last = span.end;
            }
        }
        Some(coverage)
    }

    /// The Chrome trace event format (`chrome://tracing`, ui.perfetto.dev): one complete
    /// event per span, one named thread per lane.
    pub fn write_chrome_trace(&self, mut out: impl Write) -> io::Result<()> {
        let spans = self.spans();
        let mut lanes: Vec<&str> = Vec::new();
        for span in &spans {
            if !lanes.contains(&span.lane.as_str()) {
                lanes.push(&span.lane);
            }
        }
        let lane_id = |lane: &str| lanes.iter().position(|l| *l == lane).unwrap_or(0);
        writeln!(out, "{{\"displayTimeUnit\": \"ms\", \"traceEvents\": [")?;
        let mut first = true;
        let mut separator = |out: &mut dyn Write| -> io::Result<()> {
            if !first {
                writeln!(out, ",")?;
            }
            first = false;
            Ok(())
        };
        for (id, lane) in lanes.iter().enumerate() {
            separator(&mut out)?;
            write!(
                out,
                "{{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 1, \"tid\": {id}, \"args\": {{\"name\": \"{}\"}}}}",
                escape(lane)
            )?;
        }
        for span in &spans {
            separator(&mut out)?;
            write!(
                out,
                "{{\"ph\": \"X\", \"name\": \"{}\", \"pid\": 1, \"tid\": {}, \"ts\": {:.3}, \"dur\": {:.3}}}",
                escape(&span.name),
                lane_id(&span.lane),
                span.start.as_secs_f64() * 1e6,
                (span.end - span.start).as_secs_f64() * 1e6
            )?;
        }
        writeln!(out, "\n]}}")
    }
}

/// `text` as the inside of a JSON string.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_come_out_by_start_with_their_lanes() {
        let timeline = Timeline::new();
        timeline.record("gpu", "second", || {
            std::thread::sleep(Duration::from_millis(2))
        });
        timeline.record("cpu \"0\"", "first", || ());
        let spans = timeline.spans();
        assert_eq!(spans.len(), 2);
        assert!(spans[0].start <= spans[1].start);
        assert!(spans[0].end - spans[0].start >= Duration::from_millis(2));
        let mut json = Vec::new();
        timeline.write_chrome_trace(&mut json).unwrap();
        let json = String::from_utf8(json).unwrap();
        assert!(json.contains(r#""name": "cpu \"0\"""#), "{json}");
        assert_eq!(json.matches("\"ph\": \"X\"").count(), 2);
        assert_eq!(json.matches("\"ph\": \"M\"").count(), 2);
    }

    #[test]
    fn coverage_counts_overlaps_once_and_gaps_not_at_all() {
        let timeline = Timeline::new();
        let ms = Duration::from_millis;
        let mut spans = timeline.spans.lock().unwrap();
        for (lane, start, end) in [("a", 10, 20), ("b", 15, 30), ("a", 40, 50), ("c", 0, 100)] {
            spans.push(Span {
                lane: lane.into(),
                name: "step".into(),
                start: ms(start),
                end: ms(end),
            });
        }
        drop(spans);
        let coverage = timeline.coverage(|s| s.lane != "c").unwrap();
        assert_eq!((coverage.first, coverage.last), (ms(10), ms(50)));
        assert_eq!(coverage.covered, ms(30));
        assert_eq!(coverage.span(), ms(40));
        assert!((coverage.share() - 0.75).abs() < 1e-9);
        assert_eq!(timeline.coverage(|s| s.lane == "d"), None);
    }
}
