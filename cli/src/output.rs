//! What the commands produce: lines and tables printed as they come, or with `--json` one
//! document printed at the end (an error too); spinners on stderr for long stages. Files
//! are written whole or not at all through [`wgpu_groth16::files`].

use std::fmt::{self, Display};
use std::io::{self, IsTerminal};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Map, Value};

pub use wgpu_groth16::files::OutputPlan;

/// Runs `work` and times it, under a spinner saying `what` while stderr is a terminal (a log
/// or a pipe gets no escape codes).
pub fn stage<T>(what: &str, work: impl FnOnce() -> T) -> (T, Duration) {
    let spinner = if io::stderr().is_terminal() {
        let style =
            ProgressStyle::with_template("{spinner} {msg} {elapsed}").expect("a valid template");
        let bar = ProgressBar::new_spinner()
            .with_style(style)
            .with_message(what.to_string());
        bar.enable_steady_tick(Duration::from_millis(100));
        bar
    } else {
        ProgressBar::hidden()
    };
    let start = Instant::now();
    let out = work();
    spinner.finish_and_clear();
    (out, start.elapsed())
}

/// Lower-case hex, as proofs and field elements are shown.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One cell of a table: formatted for people in text, typed in JSON (times in seconds).
pub enum Cell {
    Text(String),
    Time(Duration),
    Count(usize),
    Check(bool),
    Missing,
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cell::Text(s) => f.write_str(s),
            Cell::Time(d) => write!(f, "{d:.2?}"),
            Cell::Count(n) => write!(f, "{n}"),
            Cell::Check(true) => f.write_str("yes"),
            // Upper case so that a failure stands out in a column of "yes".
            Cell::Check(false) => f.write_str("NO"),
            Cell::Missing => f.write_str("-"),
        }
    }
}

impl Cell {
    fn json(&self) -> Value {
        match self {
            Cell::Text(s) => s.clone().into(),
            Cell::Time(d) => d.as_secs_f64().into(),
            Cell::Count(n) => (*n).into(),
            Cell::Check(b) => (*b).into(),
            Cell::Missing => Value::Null,
        }
    }
}

impl From<&str> for Cell {
    fn from(s: &str) -> Self {
        Cell::Text(s.into())
    }
}

impl From<String> for Cell {
    fn from(s: String) -> Self {
        Cell::Text(s)
    }
}

impl From<Duration> for Cell {
    fn from(d: Duration) -> Self {
        Cell::Time(d)
    }
}

impl From<usize> for Cell {
    fn from(n: usize) -> Self {
        Cell::Count(n)
    }
}

impl From<bool> for Cell {
    fn from(b: bool) -> Self {
        Cell::Check(b)
    }
}

impl<T: Into<Cell>> From<Option<T>> for Cell {
    fn from(value: Option<T>) -> Self {
        value.map_or(Cell::Missing, Into::into)
    }
}

/// A table being filled: in text each row is printed as it is added (a slow command shows
/// its progress), in JSON it becomes an object keyed by the column headers.
pub struct Table {
    /// Headers and widths.
    columns: Vec<(String, usize)>,
    /// How many leading columns are labels (left-aligned); values are right-aligned.
    labels: usize,
    rows: Option<Vec<Value>>,
}

impl Table {
    pub fn row(&mut self, cells: impl IntoIterator<Item = Cell>) {
        let cells: Vec<Cell> = cells.into_iter().collect();
        match &mut self.rows {
            Some(rows) => rows.push(Value::Object(
                self.columns
                    .iter()
                    .zip(&cells)
                    .map(|((header, _), cell)| (json_key(header), cell.json()))
                    .collect(),
            )),
            None => println!(
                "{}",
                line(
                    self.labels,
                    self.columns.iter().zip(cells.iter().map(Cell::to_string))
                )
            ),
        }
    }
}

/// A table line: every cell padded to its column's width, the first `labels` on the left.
fn line<'a>(labels: usize, cells: impl Iterator<Item = (&'a (String, usize), String)>) -> String {
    cells
        .enumerate()
        .map(|(i, ((_, width), text))| {
            let gap = if i == 0 { "" } else { " " };
            if i < labels {
                format!("{gap}{text:<width$}")
            } else {
                format!("{gap}{text:>width$}")
            }
        })
        .collect::<String>()
        .trim_end()
        .to_string()
}

/// "MSM B G1" -> "msm_b_g1": headers and labels as JSON keys.
fn json_key(header: &str) -> String {
    let key: String = header
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    key.split('_')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join("_")
}

/// One command's output, as text or as one JSON document (`--json`).
pub struct Output {
    json: Option<Map<String, Value>>,
}

impl Output {
    pub fn new(json: bool) -> Self {
        Output {
            json: json.then(Map::new),
        }
    }

    /// A fact: `line` in text, `key: value` in JSON.
    pub fn fact(&mut self, key: &str, value: impl Into<Value>, line: impl Display) {
        match &mut self.json {
            Some(doc) => {
                doc.insert(key.into(), value.into());
            }
            None => println!("{line}"),
        }
    }

    /// A line only people need (a blank line, a heading that the JSON keys already say).
    pub fn text(&self, line: impl Display) {
        if self.json.is_none() {
            println!("{line}");
        }
    }

    /// A table under `key` with these headers and minimum widths, the first `labels` of
    /// them left-aligned names, filled by `fill`.
    pub fn table<T, E>(
        &mut self,
        key: &str,
        columns: &[(&str, usize)],
        labels: usize,
        fill: impl FnOnce(&mut Table) -> Result<T, E>,
    ) -> Result<T, E> {
        let columns: Vec<(String, usize)> = columns
            .iter()
            .map(|&(header, width)| (header.to_string(), width.max(header.len())))
            .collect();
        if self.json.is_none() {
            let headers = columns.iter().map(|c| (c, c.0.clone()));
            println!("{}", line(labels, headers));
        }
        let mut table = Table {
            columns,
            labels,
            rows: self.json.as_ref().map(|_| Vec::new()),
        };
        let out = fill(&mut table)?;
        if let (Some(doc), Some(rows)) = (&mut self.json, table.rows) {
            doc.insert(key.into(), Value::Array(rows));
        }
        Ok(out)
    }

    /// Prints the JSON document (text has been printed already).
    pub fn finish(self) {
        if let Some(doc) = self.json {
            print_json(&Value::Object(doc));
        }
    }
}

/// A failed command: one line `error: ...` on stderr, and with `--json` the document
/// `{"error": "..."}` on stdout instead of the command's own (scripts parse stdout).
pub fn report_error(json: bool, error: &dyn Display) {
    let error = one_line(error);
    eprintln!("error: {error}");
    if json {
        report_json_only(error);
    }
}

/// A message as one line (drivers' messages span several): its lines, trimmed, joined.
pub fn one_line(message: &dyn Display) -> String {
    message
        .to_string()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The JSON error document alone, for errors whose line another part prints (clap's).
pub fn report_json_only(error: impl Display) {
    print_json(&json!({ "error": error.to_string() }));
}

fn print_json(doc: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(doc).expect("JSON values serialize")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_of_several_lines_becomes_one() {
        let message =
            "pipeline MsmG1/portable failed to build: Validation Error\n\n    Internal error: x";
        assert_eq!(
            one_line(&message),
            "pipeline MsmG1/portable failed to build: Validation Error Internal error: x"
        );
    }

    #[test]
    fn headers_become_snake_case_json_keys() {
        assert_eq!(json_key("MSM B G1"), "msm_b_g1");
        assert_eq!(json_key("equal to CPU"), "equal_to_cpu");
        assert_eq!(json_key("time (s)"), "time_s");
    }
}
