//! Line charts rendered to a PNG file, for learning curves (resolved rate per iteration for
//! several runs, difficulty chosen per iteration, and the like).
//!
//! Drawing is done by `plotters` into an in-memory RGB buffer that the `png` crate encodes.
//! Text is rasterised with `ab_glyph` from DejaVu Sans, which the `dejavu` crate embeds in the
//! binary: nothing is read from the system's fonts and nothing is fetched, so charts come out
//! the same on a bare machine.

use std::path::Path;
use std::sync::OnceLock;

use anyhow::{Context, ensure};
use plotters::backend::{BitMapBackend, RGBPixel};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::register_font;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// The name shown in the legend.
    pub label: String,
    /// `(x, y)` points, joined in the order given; points with a NaN or infinite coordinate
    /// are skipped (the line joins their neighbours). Each point gets a marker, except in
    /// series of more than 150 points, which get about 50 evenly spaced ones.
    pub points: Vec<(f64, f64)>,
}

/// One panel.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Shown centred above the panel (nothing when empty).
    pub title: String,
    /// Label under the x axis.
    pub x_label: String,
    /// Label beside the y axis.
    pub y_label: String,
    /// The lines, coloured in order from a ten-colour palette, with marker shapes cycling too.
    pub series: Vec<Series>,
    /// The y range to show (with a small margin so points on its edges stay visible); `None`
    /// fits the data. Parts of lines outside it are clipped.
    pub y_range: Option<(f64, f64)>,
}

/// Width of one panel in pixels.
const PANEL_WIDTH: u32 = 900;
/// Height of one panel in pixels.
const PANEL_HEIGHT: u32 = 380;
/// Most charts in one image (50 rows of two panels: about 19,000 pixels tall).
const MAX_CHARTS: usize = 100;
/// The family the embedded font is registered under; plotters' default text uses it too.
const FONT: &str = "sans-serif";
/// Series with more points than this get a marker on every n-th point only.
const MARKED_POINTS: usize = 150;
/// Size of tick labels and legend text.
const LABEL_SIZE: f64 = 16.0;
/// Widest legend column, in pixels; longer labels are cut with an ellipsis.
const LEGEND_MAX_WIDTH: u32 = 260;
/// Height of one legend row, in pixels.
const LEGEND_ROW: i32 = 24;

/// Series colours: the Tableau 10 palette, distinct from one another on white.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

const TEXT: RGBColor = RGBColor(30, 30, 30);
const MUTED: RGBColor = RGBColor(150, 150, 150);
const GRID_MAJOR: RGBColor = RGBColor(215, 215, 215);
const GRID_MINOR: RGBColor = RGBColor(238, 238, 238);

type Area<'a> = DrawingArea<BitMapBackend<'a, RGBPixel>, Shift>;

/// Writes the charts stacked vertically (or in a grid of 2 columns when there are 3 or more)
/// into one PNG.
///
/// Each panel is 900 x 380 pixels, so the image is 900 pixels wide for one or two charts
/// and 1800 for three or more. A chart with no drawable point shows an empty panel that says
/// "no data". Fails when `charts` is empty or holds more than 100 charts, or when the file
/// cannot be written.
pub fn write_png(path: &Path, charts: &[Chart]) -> anyhow::Result<()> {
    ensure!(!charts.is_empty(), "no charts to draw");
    register_fonts()?;
    let columns: u32 = if charts.len() >= 3 { 2 } else { 1 };
    ensure!(
        charts.len() <= MAX_CHARTS,
        "{} charts are too many for one image (at most {MAX_CHARTS})",
        charts.len()
    );
    let count = charts.len() as u32;
    let rows = count.div_ceil(columns);
    let (width, height) = (PANEL_WIDTH * columns, PANEL_HEIGHT * rows);
    let mut pixels = vec![255u8; width as usize * height as usize * 3];
    {
        let backend =
            BitMapBackend::<RGBPixel>::with_buffer_and_format(&mut pixels, (width, height))?;
        let root = backend.into_drawing_area();
        root.fill(&WHITE)?;
        let panels = root.split_evenly((rows as usize, columns as usize));
        for (index, (chart, panel)) in charts.iter().zip(&panels).enumerate() {
            draw_chart(panel, chart)
                .with_context(|| format!("drawing chart {index} ({:?})", chart.title))?;
        }
        root.present()?;
    }
    let png = encode_png(&pixels, width, height)?;
    frognano_repo::write_atomically(path, &png)?;
    Ok(())
}

/// Registers the embedded DejaVu Sans (regular and bold) once per process.
fn register_fonts() -> anyhow::Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).is_ok()
            && register_font(FONT, FontStyle::Bold, dejavu::sans::bold()).is_ok()
    });
    ensure!(ok, "the embedded DejaVu Sans font could not be loaded");
    Ok(())
}

fn encode_png(pixels: &[u8], width: u32, height: u32) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().context("encoding PNG")?;
    writer.write_image_data(pixels).context("encoding PNG")?;
    writer.finish().context("encoding PNG")?;
    Ok(out)
}

fn font(size: f64) -> FontDesc<'static> {
    (FONT, size).into_font()
}

// `FontDesc::style` keeps the regular glyphs in plotters 0.3.7, so bold is picked at creation.
fn bold_font(size: f64) -> FontDesc<'static> {
    FontDesc::new(FontFamily::Name(FONT), size, FontStyle::Bold)
}

fn draw_chart(panel: &Area<'_>, chart: &Chart) -> anyhow::Result<()> {
    let body = if chart.title.trim().is_empty() {
        panel.margin(8, 0, 0, 0)
    } else {
        panel
            .margin(8, 0, 0, 0)
            .titled(&chart.title, bold_font(21.0).color(&TEXT))?
    };
    let series: Vec<Vec<(f64, f64)>> = chart
        .series
        .iter()
        .map(|s| {
            s.points
                .iter()
                .copied()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .collect()
        })
        .collect();

    let legend_width = legend_width(&body, chart)?;
    let (body_width, _) = body.dim_in_pixel();
    let (plot, legend) = body.split_horizontally(body_width.saturating_sub(legend_width));
    draw_legend(&legend, chart, &series)?;

    let Some((x_range, y_range)) = ranges(&series, chart.y_range) else {
        return draw_no_data(&plot);
    };
    let x_integers = series.iter().flatten().all(|(x, _)| x.fract() == 0.0);
    let x_ticks = x_tick_count(&series, x_integers);

    let mut ctx = ChartBuilder::on(&plot)
        .margin_top(6)
        .margin_left(8)
        .margin_right(18)
        .margin_bottom(8)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x_range.0..x_range.1, y_range.0..y_range.1)?;
    ctx.configure_mesh()
        .x_labels(x_ticks)
        .y_labels(8)
        .x_label_formatter(&|v| format_tick(*v))
        .y_label_formatter(&|v| format_tick(*v))
        .label_style(font(LABEL_SIZE).color(&TEXT))
        .axis_desc_style(font(LABEL_SIZE + 1.0).color(&TEXT))
        .x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .bold_line_style(GRID_MAJOR)
        .light_line_style(GRID_MINOR)
        .max_light_lines(1)
        .axis_style(TEXT)
        .draw()?;

    // Lines and markers are drawn on the panel in pixels: data points are mapped to backend
    // pixels, then made panel-relative.
    let base = panel.get_base_pixel();
    let to_pixel = |p: &(f64, f64)| {
        let (px, py) = ctx.plotting_area().map_coordinate(p);
        (px - base.0, py - base.1)
    };
    for (index, points) in series.iter().enumerate() {
        let colour = PALETTE[index % PALETTE.len()];
        for path in clipped_paths(points, x_range, y_range) {
            draw_line(
                panel,
                &path.iter().map(to_pixel).collect::<Vec<_>>(),
                colour,
            )?;
        }
        let size = marker_size(points.len());
        for p in points.iter().step_by(marker_stride(points.len())) {
            if (x_range.0..=x_range.1).contains(&p.0) && (y_range.0..=y_range.1).contains(&p.1) {
                draw_marker(panel, to_pixel(p), index, size, colour)?;
            }
        }
    }
    Ok(())
}

/// Width of the legend column: room for the marker sample and the longest label.
fn legend_width(area: &Area<'_>, chart: &Chart) -> anyhow::Result<u32> {
    let mut widest = 0u32;
    for series in &chart.series {
        let (w, _) = area.estimate_text_size(&legend_label(series), &font(LABEL_SIZE).into())?;
        widest = widest.max(w);
    }
    if chart.series.is_empty() {
        return Ok(0);
    }
    Ok((widest + 60).min(LEGEND_MAX_WIDTH))
}

fn legend_label(series: &Series) -> String {
    let label = if series.label.trim().is_empty() {
        "(unnamed)"
    } else {
        series.label.as_str()
    };
    if series
        .points
        .iter()
        .any(|(x, y)| x.is_finite() && y.is_finite())
    {
        label.to_string()
    } else {
        format!("{label} (no data)")
    }
}

fn draw_legend(area: &Area<'_>, chart: &Chart, series: &[Vec<(f64, f64)>]) -> anyhow::Result<()> {
    let (width, height) = area.dim_in_pixel();
    if width == 0 || chart.series.is_empty() {
        return Ok(());
    }
    let style = font(LABEL_SIZE)
        .color(&TEXT)
        .pos(Pos::new(HPos::Left, VPos::Center));
    let max_text = width.saturating_sub(52);
    let rows_fit = ((height as i32 - 2 * LEGEND_ROW) / LEGEND_ROW).max(1) as usize;
    for (index, (entry, points)) in chart.series.iter().zip(series).enumerate() {
        let y = 18 + LEGEND_ROW * index as i32;
        if index + 1 == rows_fit && chart.series.len() > rows_fit {
            let rest = chart.series.len() - index;
            area.draw_text(&format!("... {rest} more"), &style.color(&MUTED), (8, y))?;
            break;
        }
        let colour = PALETTE[index % PALETTE.len()];
        draw_line(area, &[(6, y), (34, y)], colour)?;
        draw_marker(
            area,
            (20, y),
            index,
            marker_size(points.len()).max(3),
            colour,
        )?;
        let label = fit_text(area, &legend_label(entry), max_text)?;
        area.draw_text(&label, &style, (42, y))?;
    }
    Ok(())
}

/// Cuts `text` with an ellipsis so that it fits in `max_width` pixels.
fn fit_text(area: &Area<'_>, text: &str, max_width: u32) -> anyhow::Result<String> {
    if area.estimate_text_size(text, &font(LABEL_SIZE).into())?.0 <= max_width {
        return Ok(text.to_string());
    }
    let mut chars: Vec<char> = text.chars().collect();
    while !chars.is_empty() {
        chars.pop();
        let candidate: String = chars.iter().collect::<String>() + "...";
        if area
            .estimate_text_size(&candidate, &font(LABEL_SIZE).into())?
            .0
            <= max_width
        {
            return Ok(candidate);
        }
    }
    Ok("...".to_string())
}

fn draw_no_data(area: &Area<'_>) -> anyhow::Result<()> {
    let (width, height) = area.dim_in_pixel();
    let (w, h) = (width as i32, height as i32);
    area.draw(&Rectangle::new(
        [(80, 6), ((w - 18).max(81), (h - 56).max(7))],
        MUTED.stroke_width(1),
    ))?;
    let style = font(20.0)
        .color(&MUTED)
        .pos(Pos::new(HPos::Center, VPos::Center));
    area.draw_text("no data", &style, ((w + 62) / 2, (h - 50) / 2))?;
    Ok(())
}

/// A polyline two pixels thick. Plotters' wide strokes are polygons that come out about one
/// pixel wide on steep segments, so one-pixel lines are drawn on a 2 x 2 brush instead.
fn draw_line(area: &Area<'_>, path: &[(i32, i32)], colour: RGBColor) -> anyhow::Result<()> {
    for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
        let shifted: Vec<(i32, i32)> = path.iter().map(|(x, y)| (x + dx, y + dy)).collect();
        area.draw(&PathElement::new(shifted, colour.stroke_width(1)))?;
    }
    Ok(())
}

fn draw_marker(
    area: &Area<'_>,
    at: (i32, i32),
    index: usize,
    size: i32,
    colour: RGBColor,
) -> anyhow::Result<()> {
    if size <= 0 {
        return Ok(());
    }
    let style = colour.filled();
    // The marker shape changes every series, the colour every series too, so two series
    // sharing a colour (past the tenth) still differ in shape.
    match index % 3 {
        0 => area.draw(&Circle::new(at, size, style))?,
        1 => area.draw(&Rectangle::new(
            [(at.0 - size, at.1 - size), (at.0 + size, at.1 + size)],
            style,
        ))?,
        _ => area.draw(&TriangleMarker::new(at, size + 2, style))?,
    }
    Ok(())
}

/// Marker radius: smaller as series get denser, so lines stay readable.
fn marker_size(points: usize) -> i32 {
    match points {
        0..=40 => 4,
        _ => 3,
    }
}

/// Every point is marked up to `MARKED_POINTS`; denser series get a marker on every n-th
/// point only, so their lines stay readable and the shape still tells series apart.
fn marker_stride(points: usize) -> usize {
    if points <= MARKED_POINTS {
        1
    } else {
        points.div_ceil(MARKED_POINTS / 3)
    }
}

/// Number of x ticks to ask for: one per value when x holds few integers (iterations).
fn x_tick_count(series: &[Vec<(f64, f64)>], integers: bool) -> usize {
    let (lo, hi) = series
        .iter()
        .flatten()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), (x, _)| {
            (lo.min(*x), hi.max(*x))
        });
    let span = hi - lo;
    if integers && span.is_finite() && span <= 10.0 {
        (span as usize + 1).max(2)
    } else {
        10
    }
}

type Range = (f64, f64);

/// The x and y ranges to draw, with margins; `None` when there is no finite point or the
/// values are too far apart to draw.
fn ranges(series: &[Vec<(f64, f64)>], y_range: Option<Range>) -> Option<(Range, Range)> {
    let mut points = series.iter().flatten().peekable();
    points.peek()?;
    let (mut x_lo, mut x_hi, mut y_lo, mut y_hi) = (
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
    );
    for &(x, y) in points {
        x_lo = x_lo.min(x);
        x_hi = x_hi.max(x);
        y_lo = y_lo.min(y);
        y_hi = y_hi.max(y);
    }
    let y = match y_range {
        Some((a, b)) if a.is_finite() && b.is_finite() => (a.min(b), a.max(b)),
        _ => (y_lo, y_hi),
    };
    let x = padded(widen((x_lo, x_hi)), 0.02);
    let y = padded(widen(y), if y_range.is_some() { 0.02 } else { 0.06 });
    let finite = |(lo, hi): Range| (hi - lo).is_finite() && hi > lo;
    (finite(x) && finite(y)).then_some((x, y))
}

/// Gives a range of one value some width.
fn widen((lo, hi): Range) -> Range {
    if hi > lo {
        return (lo, hi);
    }
    let pad = (lo.abs() * 0.1).max(0.5);
    (lo - pad, hi + pad)
}

fn padded((lo, hi): Range, fraction: f64) -> Range {
    let pad = (hi - lo) * fraction;
    (lo - pad, hi + pad)
}

/// Tick label: short decimals, scientific notation for very large or small magnitudes.
fn format_tick(value: f64) -> String {
    let magnitude = value.abs();
    // Ticks are computed by repeated addition, so a zero tick can come out as 1e-17.
    if magnitude < 1e-12 {
        return "0".to_string();
    }
    if !(1e-3..1e6).contains(&magnitude) {
        return format!("{value:.1e}");
    }
    let text = format!("{value:.4}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The polylines to draw for `points` inside the box: segments clipped to it, joined where
/// they meet.
fn clipped_paths(points: &[(f64, f64)], x: Range, y: Range) -> Vec<Vec<(f64, f64)>> {
    let mut paths: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut current: Vec<(f64, f64)> = Vec::new();
    for pair in points.windows(2) {
        let Some((a, b)) = clip_segment(pair[0], pair[1], x, y) else {
            continue;
        };
        if current.last() != Some(&a) && !current.is_empty() {
            paths.push(std::mem::take(&mut current));
        }
        if current.is_empty() {
            current.push(a);
        }
        current.push(b);
    }
    if current.len() >= 2 {
        paths.push(current);
    }
    paths
}

/// Liang-Barsky clipping of the segment `a`-`b` to the box `x` by `y`.
fn clip_segment(
    a: (f64, f64),
    b: (f64, f64),
    x: Range,
    y: Range,
) -> Option<((f64, f64), (f64, f64))> {
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    let mut t0 = 0.0f64;
    let mut t1 = 1.0f64;
    for (p, q) in [
        (-dx, a.0 - x.0),
        (dx, x.1 - a.0),
        (-dy, a.1 - y.0),
        (dy, y.1 - a.1),
    ] {
        if p == 0.0 {
            if q < 0.0 {
                return None;
            }
        } else {
            let r = q / p;
            if p < 0.0 {
                t0 = t0.max(r);
            } else {
                t1 = t1.min(r);
            }
        }
    }
    if t0 > t1 {
        return None;
    }
    let at = |t: f64| {
        if t == 0.0 {
            a
        } else if t == 1.0 {
            b
        } else {
            (a.0 + t * dx, a.1 + t * dy)
        }
    };
    Some((at(t0), at(t1)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Decodes a PNG into (width, height, RGB bytes).
    fn decode(path: &Path) -> (u32, u32, Vec<u8>) {
        let file = std::fs::File::open(path).expect("open png");
        let decoder = png::Decoder::new(std::io::BufReader::new(file));
        let mut reader = decoder.read_info().expect("png header");
        let mut buf = vec![0; reader.output_buffer_size().expect("buffer size")];
        let info = reader.next_frame(&mut buf).expect("png frame");
        assert_eq!(info.color_type, png::ColorType::Rgb);
        buf.truncate(info.buffer_size());
        (info.width, info.height, buf)
    }

    fn colours(pixels: &[u8]) -> HashSet<[u8; 3]> {
        pixels.chunks_exact(3).map(|p| [p[0], p[1], p[2]]).collect()
    }

    fn has_colour(pixels: &[u8], colour: RGBColor) -> bool {
        colours(pixels).contains(&[colour.0, colour.1, colour.2])
    }

    fn learning_curves() -> Chart {
        let run = |label: &str, slope: f64| Series {
            label: label.to_string(),
            points: (0..30)
                .map(|i| {
                    let x = f64::from(i);
                    (x, (slope * x / (1.0 + slope * x)).min(1.0))
                })
                .collect(),
        };
        let mut third = run("run C (lr 1e-4)", 0.05);
        third.points[7].1 = f64::NAN;
        third.points[12].0 = f64::NAN;
        Chart {
            title: "Resolved rate".to_string(),
            x_label: "iteration".to_string(),
            y_label: "resolved".to_string(),
            series: vec![
                run("run A (lr 3e-4)", 0.3),
                run("run B (lr 1e-3)", 0.12),
                third,
            ],
            y_range: Some((0.0, 1.0)),
        }
    }

    #[test]
    fn writes_a_legible_chart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("curves.png");
        write_png(&path, &[learning_curves()]).expect("write png");
        let (width, height, pixels) = decode(&path);
        assert_eq!((width, height), (PANEL_WIDTH, PANEL_HEIGHT));
        assert!(colours(&pixels).len() > 20, "the image looks blank");
        for colour in &PALETTE[..3] {
            assert!(
                has_colour(&pixels, *colour),
                "series colour {colour:?} missing"
            );
        }
        assert!(
            !has_colour(&pixels, PALETTE[3]),
            "only three series were drawn"
        );
    }

    #[test]
    fn stacks_two_charts_and_grids_three() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("two.png");
        let chart = learning_curves();
        write_png(&path, &[chart.clone(), chart.clone()]).expect("write png");
        assert_eq!(decode(&path).0, PANEL_WIDTH);
        assert_eq!(decode(&path).1, 2 * PANEL_HEIGHT);
        let path = dir.path().join("three.png");
        write_png(&path, &[chart.clone(), chart.clone(), chart]).expect("write png");
        let (width, height, _) = decode(&path);
        assert_eq!((width, height), (2 * PANEL_WIDTH, 2 * PANEL_HEIGHT));
    }

    #[test]
    fn empty_data_draws_no_data_panels() {
        let empty = |series: Vec<Series>| Chart {
            title: "Nothing yet".to_string(),
            x_label: "iteration".to_string(),
            y_label: "difficulty".to_string(),
            series,
            y_range: None,
        };
        let charts = [
            empty(Vec::new()),
            empty(vec![Series {
                label: "empty".to_string(),
                points: Vec::new(),
            }]),
            empty(vec![Series {
                label: "all NaN".to_string(),
                points: vec![(f64::NAN, 1.0), (2.0, f64::NAN), (f64::INFINITY, 0.0)],
            }]),
        ];
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("empty.png");
        write_png(&path, &charts).expect("write png");
        let (width, height, pixels) = decode(&path);
        assert_eq!((width, height), (2 * PANEL_WIDTH, 2 * PANEL_HEIGHT));
        assert!(colours(&pixels).len() > 5, "the no-data panels are blank");
        assert!(write_png(&path, &[]).is_err());
    }

    #[test]
    fn single_points_and_flat_series_draw() {
        let chart = Chart {
            title: String::new(),
            x_label: "iteration".to_string(),
            y_label: "difficulty".to_string(),
            series: vec![
                Series {
                    label: "one point".to_string(),
                    points: vec![(3.0, 2.0)],
                },
                Series {
                    label: "x".repeat(200),
                    points: vec![(3.0, 2.0), (3.0, 2.0)],
                },
            ],
            y_range: Some((f64::NAN, 1.0)),
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("flat.png");
        write_png(&path, &[chart]).expect("write png");
        let (_, _, pixels) = decode(&path);
        assert!(has_colour(&pixels, PALETTE[0]));
        assert!(has_colour(&pixels, PALETTE[1]));
    }

    #[test]
    fn unwritable_path_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("missing").join("chart.png");
        assert!(write_png(&path, &[learning_curves()]).is_err());
    }

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(format_tick(0.30000000000000004), "0.3");
        assert_eq!(format_tick(-2.7755575615628914e-17), "0");
        assert_eq!(format_tick(20.0), "20");
        assert_eq!(format_tick(0.125), "0.125");
        assert_eq!(format_tick(2.5e6), "2.5e6");
    }

    #[test]
    fn segments_are_clipped_to_the_box() {
        let unit = (0.0, 1.0);
        assert_eq!(
            clip_segment((0.0, 0.5), (1.0, 0.5), unit, unit),
            Some(((0.0, 0.5), (1.0, 0.5)))
        );
        assert_eq!(
            clip_segment((0.0, 0.0), (1.0, 2.0), unit, unit),
            Some(((0.0, 0.0), (0.5, 1.0)))
        );
        assert_eq!(clip_segment((0.0, 2.0), (1.0, 3.0), unit, unit), None);
        let paths = clipped_paths(&[(0.0, 0.0), (0.5, 2.0), (1.0, 0.0)], unit, unit);
        assert_eq!(paths.len(), 2);
    }

    /// Writes a sample with several panels to the temp directory, to look at by eye:
    /// `cargo test -p frognano-cli plot::tests::sample -- --ignored`.
    #[test]
    #[ignore]
    fn sample() {
        let difficulty = Chart {
            title: "Difficulty chosen per iteration".to_string(),
            x_label: "iteration".to_string(),
            y_label: "hint level".to_string(),
            series: vec![Series {
                label: "curriculum".to_string(),
                points: (0..30)
                    .map(|i| (f64::from(i), f64::from((i / 6).min(3))))
                    .collect(),
            }],
            y_range: None,
        };
        let empty = Chart {
            title: "Held-out resolved rate".to_string(),
            x_label: "iteration".to_string(),
            y_label: "resolved".to_string(),
            series: Vec::new(),
            y_range: Some((0.0, 1.0)),
        };
        let dense = Chart {
            title: "Many dense runs, clipped to [0, 1]".to_string(),
            x_label: "step".to_string(),
            y_label: "reward".to_string(),
            series: (0..12)
                .map(|run| Series {
                    label: format!("seed {run} with a rather long description of its settings"),
                    points: (0..300)
                        .map(|i| {
                            let x = f64::from(i);
                            let wobble = (x * 0.37 + f64::from(run)).sin() * 0.15;
                            (x, x / 250.0 + wobble + f64::from(run) * 0.02)
                        })
                        .collect(),
                })
                .collect(),
            y_range: Some((0.0, 1.0)),
        };
        let path = std::env::temp_dir().join("plot_sample.png");
        write_png(&path, &[learning_curves(), difficulty, empty, dense]).expect("write png");
        let single = std::env::temp_dir().join("plot_sample_single.png");
        write_png(&single, &[learning_curves()]).expect("write png");
        println!("wrote {} and {}", path.display(), single.display());
    }
}
