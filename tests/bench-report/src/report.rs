//! BENCHMARKS.md from the records: the machine, a summary of the targets, then one section per
//! group with its table (every row a ratio against a baseline measured in the same run) and
//! its plots.

use std::fmt::Write as _;

use crate::machine::Machine;
use crate::plot::{self, Plot};
use crate::record::{Figure, Record, Series};

/// The groups in the order the report shows them; others follow in order of appearance.
pub const GROUP_ORDER: &[&str] = &[
    "Bench runs",
    "XDR codec",
    "DDP encode",
    "Soft iWARP provider vs raw TCP",
    "ONC RPC: NULL round trip",
    "ONC RPC: 1 MiB READ and WRITE",
    "ONC RPC: calls in flight",
    "Connections at scale",
    crate::guest::VERBS_GROUP,
    crate::guest::NFS_GROUP,
];

/// How the report is written.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// A warning shown at the top (e.g. a quick run on a busy machine).
    pub label: Option<String>,
    /// The command that produced the records, shown under the title.
    pub command: Option<String>,
    /// The plots' directory as the markdown links it (relative to the markdown file).
    pub plots_link: String,
}

/// A written report.
#[derive(Debug, Clone)]
pub struct Report {
    /// BENCHMARKS.md.
    pub markdown: String,
    /// `(file name, SVG document)` per plot.
    pub plots: Vec<(String, String)>,
    /// The figures whose target was missed, as `group: name (ratio, target)`.
    pub missed: Vec<String>,
}

/// A value with as many digits as it deserves.
pub fn number(v: f64) -> String {
    let a = v.abs();
    if v.is_nan() {
        "n/a".into()
    } else if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn ratio_text(f: &Figure) -> String {
    match f.ratio {
        Some(r) => {
            let mut s = format!("{}x", number(r));
            if let Some([lo, hi]) = f.ratio_range {
                let _ = write!(s, " [{} .. {}]", number(lo), number(hi));
            }
            s
        }
        None => "n/a".into(),
    }
}

/// Whether a smaller value is better: times (and CPU time per byte) are, and memory.
fn lower_is_better(unit: &str) -> bool {
    matches!(
        unit,
        "ns" | "us" | "ms" | "s" | "ns/B" | "B" | "KiB" | "MiB"
    )
}

/// The "ratio is" cell: how the ratio is formed and which way is better.
fn ratio_of(f: &Figure) -> String {
    let Some(of) = f.ratio_of.as_deref() else {
        return "-".into();
    };
    let inverted = of.trim() == "baseline / value";
    let better = if lower_is_better(&f.unit) != inverted {
        "lower is better"
    } else {
        "higher is better"
    };
    format!("{of} ({better})")
}

/// The verdict cell: `met`, `**MISSED**`, or `-` when there is no target.
fn verdict(f: &Figure) -> &'static str {
    match (f.target, f.missed()) {
        (None, _) => "-",
        (Some(_), false) => "met",
        (Some(_), true) => "**MISSED**",
    }
}

/// Markdown table cells may not hold `|`.
fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// Builds the report.
pub fn render(records: &[Record], machine: &Machine, options: &Options) -> Report {
    let figures: Vec<&Figure> = records.iter().filter_map(Record::figure).collect();
    let series: Vec<&Series> = records
        .iter()
        .filter_map(|r| match r {
            Record::Series(s) => Some(s),
            _ => None,
        })
        .collect();
    let mut groups: Vec<&str> = GROUP_ORDER.to_vec();
    for r in records {
        let g = match r {
            Record::Figure(f) => &f.group,
            Record::Note(n) => &n.group,
            Record::Series(_) => continue,
        };
        if !groups.contains(&g.as_str()) {
            groups.push(g);
        }
    }
    // A plot belongs to the group of its bench's first figure.
    let group_of_bench = |bench: &str| -> Option<&str> {
        figures
            .iter()
            .find(|f| f.bench == bench)
            .map(|f| f.group.as_str())
    };
    let plots = plot::plots(series.iter().copied());
    let missed: Vec<String> = figures
        .iter()
        .filter(|f| f.missed())
        .map(|f| {
            let against = f
                .baseline
                .as_ref()
                .map_or(String::new(), |b| format!(" vs {}", b.name));
            format!(
                "{}: {}{against} (ratio {}, target {})",
                f.group,
                f.name,
                f.ratio.map_or("n/a".into(), |r| format!("{}x", number(r))),
                f.target.map_or(String::new(), |t| t.to_string())
            )
        })
        .collect();

    let mut md = String::new();
    let _ = writeln!(md, "# Benchmarks\n");
    if let Some(label) = &options.label {
        let _ = writeln!(md, "> **{label}**\n");
    }
    if let Some(cmd) = &options.command {
        let _ = writeln!(
            md,
            "Written by `{cmd}` from the records in `target/bench-results/`; regenerate it \
             with the same command.\n"
        );
    }
    let _ = writeln!(md, "## Machine\n\n| | |\n|---|---|");
    let load = machine.load.as_deref().unwrap_or("not recorded");
    for (k, v) in [
        ("CPU", machine.cpu.as_str()),
        ("CPUs available", &machine.cores.to_string()),
        ("kernel", &machine.kernel),
        ("rustc", &machine.rustc),
        ("date", &machine.date),
        ("commit", &machine.commit),
        ("load average at the start", load),
    ] {
        let _ = writeln!(md, "| {k} | {} |", cell(v));
    }
    let _ = writeln!(
        md,
        "\n## How to read it\n\n\
         Every row compares a value with a baseline measured in the same run, on this machine, \
         interleaved with it where the bench alternates rounds: read the ratio, not the absolute \
         figure. The ratio column says how it is formed (`value / baseline` or \
         `baseline / value`; for alternating rounds it is the median of the per-round ratios, \
         with their range in brackets). A row with a target shows it and `met` or **MISSED**; \
         `scripts/bench --check` exits non-zero when any target is missed. Rows without a \
         target are there to compare, not to judge.\n"
    );
    let judged = figures.iter().filter(|f| f.target.is_some()).count();
    let _ = writeln!(
        md,
        "## Targets\n\n{judged} targets, {} met, {} missed.\n",
        judged - missed.len(),
        missed.len()
    );
    for m in &missed {
        let _ = writeln!(md, "- **MISSED** {m}");
    }
    if !missed.is_empty() {
        md.push('\n');
    }

    let mut plot_files = Vec::new();
    let mut shown_plots = vec![false; plots.len()];
    for group in groups {
        let rows: Vec<&&Figure> = figures.iter().filter(|f| f.group == group).collect();
        let notes: Vec<&str> = records
            .iter()
            .filter_map(|r| match r {
                Record::Note(n) if n.group == group => Some(n.text.as_str()),
                _ => None,
            })
            .collect();
        let group_plots: Vec<usize> = plots
            .iter()
            .enumerate()
            .filter(|(_, p)| {
                let first = p.lines[0];
                first
                    .group
                    .as_deref()
                    .or_else(|| group_of_bench(&first.bench))
                    == Some(group)
            })
            .map(|(i, _)| i)
            .collect();
        if rows.is_empty() && notes.is_empty() && group_plots.is_empty() {
            continue;
        }
        let _ = writeln!(md, "## {group}\n");
        for n in &notes {
            let _ = writeln!(md, "{n}\n");
        }
        if !rows.is_empty() {
            let _ = writeln!(
                md,
                "| figure | value | baseline | ratio | ratio is | target | |\n\
                 |---|---:|---|---:|---|---|---|"
            );
            for f in rows {
                let baseline = f.baseline.as_ref().map_or("-".to_string(), |b| {
                    format!("{}: {} {}", b.name, number(b.value), f.unit)
                });
                let _ = writeln!(
                    md,
                    "| {} | {} {} | {} | {} | {} | {} | {} |",
                    cell(&f.name),
                    number(f.value),
                    f.unit,
                    cell(&baseline),
                    ratio_text(f),
                    ratio_of(f),
                    f.target.map_or("-".to_string(), |t| t.to_string()),
                    verdict(f)
                );
            }
            md.push('\n');
        }
        for i in group_plots {
            shown_plots[i] = true;
            link_plot(&mut md, &mut plot_files, &plots[i], options);
        }
    }
    let orphans: Vec<usize> = (0..plots.len()).filter(|&i| !shown_plots[i]).collect();
    if !orphans.is_empty() {
        let _ = writeln!(md, "## Other plots\n");
        for i in orphans {
            link_plot(&mut md, &mut plot_files, &plots[i], options);
        }
    }
    Report {
        markdown: md,
        plots: plot_files,
        missed,
    }
}

/// Draws `plot` and links it from the markdown (or says why it could not be drawn).
fn link_plot(
    md: &mut String,
    files: &mut Vec<(String, String)>,
    plot: &Plot<'_>,
    options: &Options,
) {
    let file = format!("{}.svg", plot.id);
    match plot::svg(plot) {
        Ok(svg) => {
            let _ = writeln!(
                md,
                "![{}]({}/{file})\n",
                plot.title(),
                options.plots_link.trim_end_matches('/')
            );
            files.push((file, svg));
        }
        Err(e) => {
            let _ = writeln!(md, "(plot {} could not be drawn: {e})\n", plot.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_and_time_are_better_lower() {
        for unit in ["us", "ns/B", "KiB"] {
            assert!(lower_is_better(unit), "{unit}");
        }
        assert!(!lower_is_better("calls/s"));
    }
}
