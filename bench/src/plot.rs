//! Latency-percentile plots (PNG).
//!
//! The x axis is the percentile on a log scale of 1 / (1 - p) (0 %, 90 %, 99 %, 99.9 %, ...),
//! the usual HdrHistogram view, with the maximum at the right edge; the y axis is latency in
//! milliseconds on a log scale.
//!
//! Text needs a TrueType font, which is read at run time (no system font library is linked):
//! `KAAS_BENCH_FONT` if set, otherwise the first of a few common font files. Without one the
//! plot is drawn without any text and a note says so on stderr.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{anyhow, bail, Context};
use clap::Args;
use plotters::prelude::*;

use crate::report::{PercentilePoint, Report};

/// One curve.
#[derive(Clone, Debug)]
pub struct Series {
    pub label: String,
    pub points: Vec<PercentilePoint>,
}

/// `kaas-bench plot` flags.
#[derive(Args, Debug, Clone)]
pub struct PlotArgs {
    /// JSON reports written by `kaas-bench run` (one curve each, or two for end-to-end runs).
    #[arg(required = true)]
    pub reports: Vec<PathBuf>,
    /// Output PNG.
    #[arg(long, default_value = "latency.png")]
    pub out: PathBuf,
    /// Plot title.
    #[arg(long, default_value = "latency by percentile")]
    pub title: String,
    /// Which latency to draw: produce, end-to-end, or both.
    #[arg(long, default_value = "both")]
    pub latency: String,
}

/// `kaas-bench plot`.
pub fn plot_command(args: &PlotArgs) -> anyhow::Result<()> {
    let mut series = Vec::new();
    for path in &args.reports {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let report: Report =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        series.extend(series_of_report(&report).into_iter().filter(|s| {
            args.latency == "both" || s.label.ends_with(&format!(" {}", args.latency))
        }));
    }
    if series.is_empty() {
        bail!("the reports hold no latencies");
    }
    draw_percentile_plot(&args.out, &args.title, &series)?;
    eprintln!("plot: {}", args.out.display());
    Ok(())
}

/// The curves of a report: `<target> end-to-end` and `<target> produce` when present.
pub fn series_of_report(report: &Report) -> Vec<Series> {
    let mut series = Vec::new();
    if !report.summary.end_to_end_latency_curve.is_empty() {
        series.push(Series {
            label: format!("{} end-to-end", report.target),
            points: report.summary.end_to_end_latency_curve.clone(),
        });
    }
    if !report.summary.produce_latency_curve.is_empty() {
        series.push(Series {
            label: format!("{} produce", report.target),
            points: report.summary.produce_latency_curve.clone(),
        });
    }
    series
}

/// Rightmost regular percentile shown (99.999 %) on the 1 / (1 - p) scale.
const X_NINES: f64 = 5.0;
/// Where the maximum is drawn.
const X_MAX: f64 = 5.5;

fn x_of(percentile: f64) -> f64 {
    if percentile >= 100.0 {
        return X_MAX;
    }
    let rest = (1.0 - percentile / 100.0).max(1e-12);
    (-rest.log10()).min(X_NINES)
}

fn x_label(x: &f64) -> String {
    if (x - X_MAX).abs() < 0.05 {
        return "max".into();
    }
    let nines = x.round();
    if (x - nines).abs() > 0.05 || nines > X_NINES {
        return String::new();
    }
    match nines as i32 {
        0 => "0%".into(),
        1 => "90%".into(),
        2 => "99%".into(),
        3 => "99.9%".into(),
        4 => "99.99%".into(),
        5 => "99.999%".into(),
        _ => String::new(),
    }
}

fn font_candidates() -> Vec<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(path) = std::env::var_os("KAAS_BENCH_FONT") {
        candidates.push(PathBuf::from(path));
        return candidates;
    }
    for path in [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
        "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
        "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
        "/System/Library/Fonts/Supplemental/Arial.ttf",
    ] {
        candidates.push(PathBuf::from(path));
    }
    candidates
}

/// Registers a font for plotters once; false when none could be loaded.
fn fonts_available() -> bool {
    static LOADED: OnceLock<bool> = OnceLock::new();
    *LOADED.get_or_init(|| {
        for path in font_candidates() {
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            // plotters keeps fonts for the life of the process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                return true;
            }
        }
        eprintln!(
            "note: no TrueType font found (set KAAS_BENCH_FONT); drawing the plot without text"
        );
        false
    })
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x17, 0xbe, 0xcf),
];

/// Draws `series` into a PNG at `path`.
pub fn draw_percentile_plot(path: &Path, title: &str, series: &[Series]) -> anyhow::Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let text = fonts_available();
    let values_ms: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.latency_us as f64 / 1e3))
        .collect();
    if values_ms.is_empty() {
        bail!("nothing to plot");
    }
    let low = values_ms
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min)
        .max(0.001);
    let high = values_ms.iter().copied().fold(0.0, f64::max).max(low * 2.0);
    let y_range = (low / 1.5)..(high * 1.5);

    let root = BitMapBackend::new(path, (1200, 750)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let mut builder = ChartBuilder::on(&root);
    builder.margin(20);
    if text {
        builder
            .caption(title, ("sans-serif", 26))
            .x_label_area_size(50)
            .y_label_area_size(80);
    }
    let mut chart = builder
        .build_cartesian_2d(0.0..X_MAX + 0.05, y_range.log_scale())
        .map_err(|e| anyhow!("{e}"))?;
    let mut mesh = chart.configure_mesh();
    if text {
        mesh.x_labels(12)
            .x_label_formatter(&x_label)
            .light_line_style(RGBColor(0xee, 0xee, 0xee))
            .y_label_formatter(&|ms| format!("{ms} ms"))
            .x_desc("percentile")
            .y_desc("latency")
            .label_style(("sans-serif", 16));
    } else {
        mesh.x_labels(0)
            .y_labels(0)
            .light_line_style(RGBColor(0xee, 0xee, 0xee));
    }
    mesh.draw().map_err(|e| anyhow!("{e}"))?;

    for (index, one) in series.iter().enumerate() {
        let color = PALETTE[index % PALETTE.len()];
        let points: Vec<(f64, f64)> = one
            .points
            .iter()
            .map(|p| (x_of(p.percentile), (p.latency_us as f64 / 1e3).max(low)))
            .collect();
        let drawn = chart
            .draw_series(LineSeries::new(points, color.stroke_width(3)))
            .map_err(|e| anyhow!("{e}"))?;
        if text {
            drawn.label(one.label.clone()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3))
            });
        }
    }
    if text {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 18))
            .draw()
            .map_err(|e| anyhow!("{e}"))?;
    }
    root.present()
        .map_err(|e| anyhow!("{e}"))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn percentiles_map_to_nines() {
        assert_eq!(x_of(0.0), 0.0);
        assert!((x_of(90.0) - 1.0).abs() < 1e-9);
        assert!((x_of(99.9) - 3.0).abs() < 1e-9);
        assert_eq!(x_of(100.0), X_MAX);
        assert_eq!(x_label(&2.0), "99%");
        assert_eq!(x_label(&X_MAX), "max");
        assert_eq!(x_label(&2.5), "");
    }

    #[test]
    fn draws_a_png_with_or_without_fonts() {
        let dir = std::env::temp_dir().join(format!("kaas-bench-plot-{}", std::process::id()));
        let path = dir.join("p.png");
        let points = (0..=10)
            .map(|i| PercentilePoint {
                percentile: if i == 10 {
                    100.0
                } else {
                    100.0 * (1.0 - 0.5f64.powi(i))
                },
                latency_us: 100 * (i as u64 + 1),
            })
            .collect();
        draw_percentile_plot(
            &path,
            "test",
            &[Series {
                label: "a".into(),
                points,
            }],
        )
        .unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
