//! What a bench writes: one JSON object per line, one file per bench.
//!
//! A [`Figure`] is one row of the report: a measured value, the baseline it is compared with
//! (measured in the same run), their ratio and, when the project has one, the target that
//! ratio must meet. A [`Series`] is one line of a plot (x, y pairs). A [`Note`] is a sentence
//! the report prints under the bench's group (how it was run, what it skipped).
//!
//! ```no_run
//! use bench_report::{Recorder, Target};
//!
//! let mut rec = Recorder::new("write_encode");
//! rec.figure("DDP", "encode, 16 MiB payload vs 4 KiB", 120.0, "ns")
//!     .baseline("4 KiB payload", 115.0)
//!     .ratio(120.0 / 115.0, "value / baseline")
//!     .target(Target::at_most(1.1));
//! rec.series("ddp_encode", "NFSv3 WRITE encode", "encoder (payload by reference)")
//!     .axes("payload (bytes)", "ns per encode")
//!     .log_x()
//!     .point(4096.0, 115.0);
//! rec.save().unwrap();
//! ```

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The environment variable naming the directory the records go to (default:
/// `target/bench-results` of the bench's own target directory).
pub const RESULTS_DIR_ENV: &str = "BENCH_RESULTS_DIR";

/// The environment variable asking for short measurements (`1`): what `scripts/bench --quick`
/// sets.
pub const QUICK_ENV: &str = "BENCH_QUICK";

/// Whether the bench should measure briefly ([`QUICK_ENV`] is `1`).
pub fn quick() -> bool {
    std::env::var(QUICK_ENV).is_ok_and(|v| v == "1")
}

/// One line of a records file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    /// A table row.
    Figure(Figure),
    /// A line of a plot.
    Series(Series),
    /// A sentence about how a group was measured.
    Note(Note),
}

impl Record {
    /// The table row, if this is one.
    pub fn figure(&self) -> Option<&Figure> {
        match self {
            Record::Figure(f) => Some(f),
            _ => None,
        }
    }
}

/// Which way a ratio must lie.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cmp {
    /// The ratio may not exceed the bound.
    AtMost,
    /// The ratio may not fall below the bound.
    AtLeast,
}

/// A bound on a figure's ratio.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// Which way.
    pub cmp: Cmp,
    /// The bound.
    pub bound: f64,
}

impl Target {
    /// The ratio may be at most `bound`.
    pub fn at_most(bound: f64) -> Target {
        Target {
            cmp: Cmp::AtMost,
            bound,
        }
    }

    /// The ratio must be at least `bound`.
    pub fn at_least(bound: f64) -> Target {
        Target {
            cmp: Cmp::AtLeast,
            bound,
        }
    }

    /// Whether `ratio` meets the target (a NaN never does).
    pub fn holds(&self, ratio: f64) -> bool {
        match self.cmp {
            Cmp::AtMost => ratio <= self.bound,
            Cmp::AtLeast => ratio >= self.bound,
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.cmp {
            Cmp::AtMost => write!(f, "<= {}", self.bound),
            Cmp::AtLeast => write!(f, ">= {}", self.bound),
        }
    }
}

/// The baseline a figure is compared with, measured in the same run, in the figure's unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// What it is ("raw TCP", "rpcgen + libtirpc").
    pub name: String,
    /// Its value.
    pub value: f64,
}

/// One table row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// The bench that measured it.
    pub bench: String,
    /// The report section ("codec", "soft provider", ...).
    pub group: String,
    /// What was measured.
    pub name: String,
    /// The measured value (NaN when it could not be measured; written as `null`).
    #[serde(deserialize_with = "null_as_nan")]
    pub value: f64,
    /// Its unit ("ns", "us", "MB/s", "calls/s").
    pub unit: String,
    /// The same-run baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Baseline>,
    /// The ratio against the baseline (for alternating rounds, the median of the per-round
    /// ratios, which need not equal value / baseline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// How the ratio is formed: "value / baseline" or "baseline / value".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_of: Option<String>,
    /// The least and greatest per-round ratio, when there were rounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_range: Option<[f64; 2]>,
    /// The project's target for the ratio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
    /// Whether the target was met (set by [`Recorder::save`] from `ratio` and `target`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub met: Option<bool>,
}

impl Figure {
    /// Sets the baseline.
    pub fn baseline(&mut self, name: impl Into<String>, value: f64) -> &mut Self {
        self.baseline = Some(Baseline {
            name: name.into(),
            value,
        });
        self
    }

    /// Sets the ratio and how it is formed ("value / baseline" or "baseline / value").
    pub fn ratio(&mut self, ratio: f64, of: impl Into<String>) -> &mut Self {
        self.ratio = Some(ratio);
        self.ratio_of = Some(of.into());
        self
    }

    /// Sets the range of the per-round ratios.
    pub fn ratio_range(&mut self, lo: f64, hi: f64) -> &mut Self {
        self.ratio_range = Some([lo, hi]);
        self
    }

    /// Sets the target.
    pub fn target(&mut self, target: Target) -> &mut Self {
        self.target = Some(target);
        self
    }

    /// Whether a target is set and missed (also when the ratio is missing or NaN).
    pub fn missed(&self) -> bool {
        match (self.target, self.ratio) {
            (Some(t), Some(r)) => !t.holds(r),
            (Some(_), None) => true,
            (None, _) => false,
        }
    }
}

/// One line of a plot; the plot is named by `plot` and takes its title and axes from its
/// first series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// The bench that measured it.
    pub bench: String,
    /// The plot it belongs to (also its file name: `<plot>.svg`).
    pub plot: String,
    /// The report section it is shown in (default: that of the bench's first figure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The plot's title.
    pub title: String,
    /// This line's label.
    pub name: String,
    /// The x axis label.
    #[serde(default)]
    pub x_label: String,
    /// The y axis label.
    #[serde(default)]
    pub y_label: String,
    /// Whether the x axis is logarithmic (sizes, calls in flight).
    #[serde(default)]
    pub log_x: bool,
    /// Whether the y axis is logarithmic (lines that differ by orders of magnitude).
    #[serde(default)]
    pub log_y: bool,
    /// The points, in x order.
    pub points: Vec<[f64; 2]>,
}

impl Series {
    /// Sets the axis labels.
    pub fn axes(&mut self, x: impl Into<String>, y: impl Into<String>) -> &mut Self {
        self.x_label = x.into();
        self.y_label = y.into();
        self
    }

    /// Shows the plot in report section `group`.
    pub fn group(&mut self, group: &str) -> &mut Self {
        self.group = Some(group.into());
        self
    }

    /// Makes the x axis logarithmic.
    pub fn log_x(&mut self) -> &mut Self {
        self.log_x = true;
        self
    }

    /// Makes the y axis logarithmic.
    pub fn log_y(&mut self) -> &mut Self {
        self.log_y = true;
        self
    }

    /// Adds a point (a point that is not finite is left out: it cannot be drawn).
    pub fn point(&mut self, x: f64, y: f64) -> &mut Self {
        if x.is_finite() && y.is_finite() {
            self.points.push([x, y]);
        }
        self
    }
}

/// A sentence under a group of the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Note {
    /// The bench that wrote it.
    pub bench: String,
    /// The report section it belongs to.
    pub group: String,
    /// The sentence.
    pub text: String,
}

/// Collects a bench's records and writes them to `<dir>/<bench>.json`.
#[derive(Debug)]
pub struct Recorder {
    bench: String,
    path: PathBuf,
    records: Vec<Record>,
}

impl Recorder {
    /// A recorder for `bench`, writing into [`results_dir`].
    pub fn new(bench: &str) -> Recorder {
        Recorder::in_dir(bench, &results_dir())
    }

    /// A recorder for `bench`, writing into `dir`.
    pub fn in_dir(bench: &str, dir: &Path) -> Recorder {
        Recorder {
            bench: bench.into(),
            path: dir.join(format!("{bench}.json")),
            records: Vec::new(),
        }
    }

    /// The file [`save`](Self::save) writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Adds a table row and returns it for its baseline, ratio and target.
    pub fn figure(&mut self, group: &str, name: &str, value: f64, unit: &str) -> &mut Figure {
        self.records.push(Record::Figure(Figure {
            bench: self.bench.clone(),
            group: group.into(),
            name: name.into(),
            value,
            unit: unit.into(),
            baseline: None,
            ratio: None,
            ratio_of: None,
            ratio_range: None,
            target: None,
            met: None,
        }));
        match self.records.last_mut() {
            Some(Record::Figure(f)) => f,
            _ => unreachable!("just pushed a figure"),
        }
    }

    /// Adds a plot line (plot `plot`, titled `title`; this line labelled `name`) and returns it
    /// for its axes and points.
    pub fn series(&mut self, plot: &str, title: &str, name: &str) -> &mut Series {
        self.records.push(Record::Series(Series {
            bench: self.bench.clone(),
            plot: plot.into(),
            group: None,
            title: title.into(),
            name: name.into(),
            x_label: String::new(),
            y_label: String::new(),
            log_x: false,
            log_y: false,
            points: Vec::new(),
        }));
        match self.records.last_mut() {
            Some(Record::Series(s)) => s,
            _ => unreachable!("just pushed a series"),
        }
    }

    /// Adds a sentence under `group`.
    pub fn note(&mut self, group: &str, text: impl Into<String>) {
        self.records.push(Record::Note(Note {
            bench: self.bench.clone(),
            group: group.into(),
            text: text.into(),
        }));
    }

    /// The records so far.
    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// Judges every figure with a target (`met`), then writes the records, one JSON object a
    /// line, replacing the file; prints where they went on standard error.
    pub fn save(&mut self) -> std::io::Result<()> {
        for r in &mut self.records {
            if let Record::Figure(f) = r {
                if f.target.is_some() {
                    f.met = Some(!f.missed());
                }
            }
        }
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut out = std::io::BufWriter::new(std::fs::File::create(&self.path)?);
        for r in &self.records {
            serde_json::to_writer(&mut out, r)?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
        eprintln!("records written to {}", self.path.display());
        Ok(())
    }
}

/// JSON has no NaN: serde_json writes it as `null`, read back here as NaN.
fn null_as_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// Where records go: [`RESULTS_DIR_ENV`] if set, else `bench-results` in the target directory
/// holding the running executable (the nearest ancestor with cargo's `CACHEDIR.TAG`, or the
/// directory above `<profile>/deps/`), else `target/bench-results`.
pub fn results_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(RESULTS_DIR_ENV) {
        return dir.into();
    }
    let target = std::env::current_exe().ok().and_then(|exe| {
        exe.ancestors()
            .find(|d| d.join("CACHEDIR.TAG").is_file())
            .map(Path::to_path_buf)
            .or_else(|| {
                let deps = exe.parent()?;
                (deps.file_name()? == "deps")
                    .then(|| deps.parent()?.parent().map(Path::to_path_buf))?
            })
    });
    target
        .unwrap_or_else(|| PathBuf::from("target"))
        .join("bench-results")
}

/// Reads one records file (JSON lines; blank lines skipped); errors name the line.
pub fn read_records(path: &Path) -> Result<Vec<Record>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_judges_targets_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut rec = Recorder::in_dir("b", dir.path());
        rec.figure("g", "fast", 1.0, "us")
            .baseline("base", 2.0)
            .ratio(0.5, "value / baseline")
            .target(Target::at_most(1.0));
        rec.figure("g", "slow", 3.0, "us")
            .ratio(1.5, "value / baseline")
            .target(Target::at_most(1.0));
        rec.figure("g", "no ratio", 3.0, "us")
            .target(Target::at_least(1.0));
        rec.series("p", "t", "s").point(1.0, 2.0);
        rec.note("g", "n");
        rec.save().unwrap();
        let back = read_records(&dir.path().join("b.json")).unwrap();
        let met: Vec<_> = back
            .iter()
            .filter_map(|r| match r {
                Record::Figure(f) => Some(f.met),
                _ => None,
            })
            .collect();
        assert_eq!(met, [Some(true), Some(false), Some(false)]);
        assert_eq!(back.len(), 5);
    }

    #[test]
    fn nan_never_meets_a_target() {
        assert!(!Target::at_least(1.0).holds(f64::NAN));
        assert!(!Target::at_most(1.0).holds(f64::NAN));
    }
}
