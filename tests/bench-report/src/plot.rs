//! SVG line plots of the records' series, one file per plot, drawn with `plotters`' SVG
//! backend (no font or bitmap stack: text stays `<text>` in the file).

use std::ops::Range;

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

use crate::record::Series;

/// Plot size in pixels.
const SIZE: (u32, u32) = (760, 440);

/// One plot: every series with the same `plot` name.
#[derive(Debug, Clone)]
pub struct Plot<'a> {
    /// The file stem and identifier.
    pub id: String,
    /// Its lines; the first gives the title and the axes.
    pub lines: Vec<&'a Series>,
}

impl Plot<'_> {
    /// The title.
    pub fn title(&self) -> &str {
        &self.lines[0].title
    }
}

/// Groups `series` into plots, in order of first appearance.
pub fn plots<'a>(series: impl IntoIterator<Item = &'a Series>) -> Vec<Plot<'a>> {
    let mut out: Vec<Plot<'a>> = Vec::new();
    for s in series {
        match out.iter_mut().find(|p| p.id == s.plot) {
            Some(p) => p.lines.push(s),
            None => out.push(Plot {
                id: s.plot.clone(),
                lines: vec![s],
            }),
        }
    }
    out
}

/// The range an axis spans: from 0 on a linear axis (so a flat line looks flat), from a
/// little under the least value on a logarithmic one.
fn span(values: impl Iterator<Item = f64> + Clone, log: bool, from_zero: bool) -> Range<f64> {
    let lo = values.clone().fold(f64::INFINITY, f64::min);
    let hi = values.fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() || !hi.is_finite() {
        return if log { 1.0..10.0 } else { 0.0..1.0 };
    }
    if log {
        let lo = if lo > 0.0 { lo } else { 1e-3 };
        (lo / 1.3)..(hi.max(lo) * 1.3)
    } else if from_zero {
        0.0..(hi * 1.1).max(1e-9)
    } else {
        let pad = ((hi - lo) * 0.05).max(1e-9);
        (lo - pad)..(hi + pad)
    }
}

/// Draws `plot` as an SVG document.
pub fn svg(plot: &Plot<'_>) -> Result<String, String> {
    let first = plot.lines[0];
    let xs = plot
        .lines
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p[0]));
    let ys = plot
        .lines
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p[1]));
    let x = span(xs, first.log_x, false);
    let y = span(ys, first.log_y, true);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        match (first.log_x, first.log_y) {
            (false, false) => draw(&root, plot, x, y),
            // Sizes and calls in flight are powers of two: ticks at powers of two.
            (true, false) => draw(&root, plot, x.log_scale().base(2.0), y),
            (false, true) => draw(&root, plot, x, y.log_scale()),
            (true, true) => draw(&root, plot, x.log_scale().base(2.0), y.log_scale()),
        }
        .map_err(|e| format!("plot {}: {e}", plot.id))?;
        root.present()
            .map_err(|e| format!("plot {}: {e}", plot.id))?;
    }
    Ok(out)
}

fn draw<X, Y>(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    plot: &Plot<'_>,
    x: X,
    y: Y,
) -> Result<(), String>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let first = plot.lines[0];
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(root)
        .caption(&first.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(x, y)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(first.x_label.as_str())
        .y_desc(first.y_label.as_str())
        .x_label_formatter(&|v| short(*v))
        .y_label_formatter(&|v| short(*v))
        .draw()
        .map_err(err)?;
    for (i, s) in plot.lines.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let points: Vec<(f64, f64)> = s.points.iter().map(|p| (p[0], p[1])).collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(s.name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, 3, color.filled())),
            )
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(legend_corner(plot))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    Ok(())
}

/// The upper corner the lines leave free: the right one when they start higher than they
/// end (falling lines), the left one otherwise.
fn legend_corner(plot: &Plot<'_>) -> SeriesLabelPosition {
    let mean = |pick: fn(&[[f64; 2]]) -> Option<&[f64; 2]>| {
        let ys: Vec<f64> = plot
            .lines
            .iter()
            .filter_map(|s| pick(&s.points).map(|p| p[1]))
            .collect();
        ys.iter().sum::<f64>() / ys.len().max(1) as f64
    };
    if mean(|p| p.first()) > mean(|p| p.last()) {
        SeriesLabelPosition::UpperRight
    } else {
        SeriesLabelPosition::UpperLeft
    }
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// A tick label: sizes as KiB/MiB when they are powers of two, other numbers short.
fn short(v: f64) -> String {
    const KIB: f64 = 1024.0;
    let a = v.abs();
    if a >= KIB * KIB && (v / (KIB * KIB)).fract() == 0.0 {
        format!("{}Mi", v / (KIB * KIB))
    } else if a >= KIB && (v / KIB).fract() == 0.0 {
        format!("{}Ki", v / KIB)
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}
