//! The overlap report in the catalogs' words (`inspect.*`), so that `--lang zh` reads it in
//! Chinese: the thresholds it used, each window (what it is, what it launched and what ran
//! during it, each engine class's busy time, the bound and the findings, the costliest
//! first), which ranges were recorded whole, and what was found across windows.
use crate::t;
use crate::text::{fixed, pad, Lang, Text};
use crate::trace::inspect::engines::Engine;
use crate::trace::inspect::findings::{Finding, Rule};
use crate::trace::inspect::measure::Figures;
use crate::trace::inspect::overlap::{OverlapReport, WindowReport};
use crate::trace::inspect::tables::Tables;
use crate::trace::inspect::wholeness::RangeWhole;
use crate::trace::inspect::windows::{Part, MAX_RANGE_NAMES};

fn percent(fraction: Option<f64>) -> String {
    fraction.map_or("-".to_string(), |f| format!("{:.0}%", f * 100.0))
}

/// An engine class's name in `lang` (the catalogs' `inspect.engine.*`).
pub fn engine_name(engine: Engine, lang: Lang) -> String {
    Text::message(&format!("inspect.engine.{}", engine_key(engine)), Vec::new()).render(lang)
}

fn engine_key(engine: Engine) -> &'static str {
    match engine {
        Engine::Compute => "compute",
        Engine::CopyIn => "copy_in",
        Engine::CopyOut => "copy_out",
        Engine::DeviceCopy => "device_copy",
        Engine::Collective => "collective",
    }
}

/// The bound's formula with a set of figures.
pub fn bound_formula(figures: &Figures, lang: Lang) -> String {
    let terms: Vec<String> = Engine::ALL
        .iter()
        .map(|e| format!("{} {:.3}", engine_name(*e, lang), figures.busy.of(*e)))
        .collect();
    let busiest = match figures.bound_engine {
        Some(e) => engine_name(e, lang),
        None => t!("inspect.no_engine").render(lang),
    };
    t!("inspect.bound", terms = terms.join(", "), ms = fixed(figures.bound_ms, 3), busiest)
        .render(lang)
}

fn over(figures: &Figures) -> String {
    figures.measured_over_bound.map_or("-".to_string(), |r| format!("{r:.2}x"))
}

/// What the window is, in words: its process, device and part or range.
pub fn title(w: &WindowReport, lang: Lang) -> String {
    let w = &w.window;
    let mut name = String::new();
    if w.process != 0 {
        name += &t!("inspect.process", pid = w.process).render(lang);
        name += " · ";
    }
    name += &t!("inspect.gpu", device = w.device).render(lang);
    let part = match (w.part, &w.range) {
        (Part::Range, Some(range)) => t!("inspect.range", range = range.clone(), n = w.occurrences),
        (Part::StartUp, _) => t!("inspect.part.start_up"),
        (Part::Rest, _) => t!("inspect.part.rest"),
        _ => return name,
    };
    name + " · " + &part.render(lang)
}

fn line(text: Text, lang: Lang) -> String {
    text.render(lang) + "\n"
}

/// The window as text.
pub fn window_text(w: &WindowReport, lang: Lang) -> String {
    let f = &w.figures;
    let mut out = line(
        t!(
            "inspect.window",
            name = title(w, lang),
            ms = fixed(f.span_ms, 3),
            from = fixed(w.start_ms, 3),
            to = fixed(w.end_ms, 3)
        ),
        lang,
    );
    let counts = &f.counts;
    let held = t!(
        "inspect.held",
        kernels = counts.kernels,
        copies = counts.copies,
        memsets = counts.memsets,
        collectives = counts.collectives
    );
    out += &format!("  {}", line(held, lang));
    if let Some(during) = &w.ran_during {
        let d = &during.figures;
        out += &format!("  {}", line(t!("inspect.launched_in"), lang));
        let ran = t!(
            "inspect.ran_during",
            ms = fixed(d.span_ms, 3),
            kernels = d.counts.kernels,
            copies = d.counts.copies,
            bound = fixed(d.bound_ms, 3),
            x = over(d)
        );
        out += &format!("  {}", line(ran, lang));
    }
    if let Some(c) = &w.projection {
        let by = t!(
            "inspect.charged",
            thread = c.by_thread,
            process = c.by_process,
            time = c.by_start_time
        );
        out += &format!("  {}", line(by, lang));
    }
    out += &format!("  {}", line(t!("inspect.busy"), lang));
    for engine in Engine::ALL {
        let name = pad(&engine_name(engine, lang), 24);
        out += &format!("    {name}{:>10.3} ms\n", f.busy.of(engine));
    }
    let under = t!(
        "inspect.copies_under",
        ms = fixed(f.copy_and_compute_ms, 3),
        of_copy = percent(f.copy_under_compute),
        copy_ms = fixed(f.copy_ms, 3),
        of_compute = percent(f.compute_under_copy)
    );
    out += &format!("  {}", line(under, lang));
    out += &tables_text(&w.tables, lang);
    if let Some(c) = &w.comm {
        let text = t!(
            "inspect.comm",
            ms = fixed(c.collective_ms, 3),
            hidden = fixed(c.hidden_ms, 3),
            share = percent(Some(c.hidden_share)),
            exposed = fixed(c.exposed_ms, 3),
            if_hidden = fixed(c.window_if_hidden_ms, 3)
        );
        out += &format!("  {}", line(text, lang));
    }
    out += &format!("  {}\n", bound_formula(f, lang));
    out += &format!("    {}", line(t!("inspect.bound_why"), lang));
    out += &format!("  {}", line(t!("inspect.over", x = over(f)), lang));
    if w.findings.is_empty() && w.folded.is_none() {
        out += &format!("  {}", line(t!("inspect.findings_none"), lang));
    }
    for finding in &w.findings {
        out += &finding_text(finding, lang);
    }
    if let Some(folded) = &w.folded {
        let text = t!(
            "inspect.folded",
            n = folded.findings.len(),
            count = folded.count,
            ms = fixed(folded.cost_ms, 3)
        );
        out += &format!("  {}", line(text, lang));
    }
    out
}

/// How many of a window's top kernels the text shows (the JSON holds more).
const KERNELS_SHOWN: usize = 5;

/// A window's tables: its top kernels, copies and memsets, a line each.
fn tables_text(t: &Tables, lang: Lang) -> String {
    let mut out = String::new();
    if !t.top_kernels.is_empty() {
        out += &format!("  {}", line(t!("inspect.top_kernels"), lang));
    }
    for k in t.top_kernels.iter().take(KERNELS_SHOWN) {
        let row = t!(
            "inspect.kernel_row",
            name = k.name.clone(),
            count = k.count,
            total = fixed(k.total_ms, 3),
            mean = fixed(k.mean_ms, 4),
            share = percent(k.share_of_compute)
        );
        out += &format!("    {}", line(row, lang));
    }
    if !t.copies.is_empty() {
        out += &format!("  {}", line(t!("inspect.copies_table"), lang));
    }
    for c in &t.copies {
        // Copies in and out are named as their engine classes are.
        let key = match c.direction {
            "copy_in" | "copy_out" => format!("inspect.engine.{}", c.direction),
            other => format!("inspect.direction.{other}"),
        };
        let direction = Text::message(&key, Vec::new());
        let memory = match c.memory {
            "" => Text::Plain(String::new()),
            m => Text::message(&format!("inspect.memory.{m}"), Vec::new()),
        };
        let mut row = t!(
            "inspect.copy_row",
            direction,
            memory,
            count = c.count,
            mb = fixed(c.bytes as f64 / 1e6, 1),
            ms = fixed(c.total_ms, 3),
            gbs = fixed(c.gb_per_s, 1)
        )
        .render(lang);
        if let Some(m) = &c.measured {
            let gpu = m.gpu.clone();
            let measured = t!(
                "inspect.measured",
                gbs = fixed(m.gb_per_s, 1),
                lesson = m.lesson.to_string(),
                gpu,
                date = m.date.clone()
            );
            row += &measured.render(lang);
        }
        out += &format!("    {row}\n");
    }
    if let Some(m) = &t.memsets {
        let row = t!(
            "inspect.memsets",
            count = m.count,
            mb = fixed(m.bytes as f64 / 1e6, 1),
            ms = fixed(m.total_ms, 3)
        );
        out += &format!("  {}", line(row, lang));
    }
    out
}

/// One finding: what was seen, its count and cost, an example and the lesson.
pub fn finding_text(f: &Finding, lang: Lang) -> String {
    let key = f.rule.key();
    let head = match (f.rule, &f.ahead) {
        (Rule::CpuAhead, Some(a)) => t!(
            "inspect.ahead",
            ms = fixed(a.median_ms, 3),
            steps = a.steps.map_or(Text::Plain("-".into()), |s| fixed(s, 1)),
            max = fixed(a.max_ms, 3),
            n = f.count,
            launch_us = a.launch_call_us.map_or(Text::Plain("-".into()), |us| fixed(us, 1))
        ),
        _ => {
            let seen = Text::message(&format!("inspect.seen.{key}"), Vec::new());
            let cost = Text::message(&format!("inspect.cost.{key}"), Vec::new());
            t!("inspect.finding", seen, n = f.count, ms = fixed(f.cost_ms, 3), cost)
        }
    };
    let example = t!(
        "inspect.example",
        label = f.example.label.clone(),
        stream = f.example.stream.clone(),
        at = fixed(f.example.start_ms, 3)
    );
    let lesson = t!("inspect.lesson", lesson = f.lesson.to_string());
    format!("  {}\n    {}\n    {}\n", head.render(lang), example.render(lang), lesson.render(lang))
}

fn whole_text(r: &RangeWhole, lang: Lang) -> String {
    let range = format!("\"{}\"", r.range);
    let span = match (r.first, r.last) {
        (Some(first), Some(last)) => format!("#{first}–#{last}"),
        _ => "-".to_string(),
    };
    let mut text =
        t!("inspect.whole", pid = r.process, range, whole = r.whole, total = r.total, span)
            .render(lang);
    if let Some((every, seen)) = r.sampled {
        text += &t!("inspect.whole_sampled", every, seen).render(lang);
    }
    text + "\n"
}

/// The report as text: the thresholds it used, then each window, then which ranges were
/// recorded whole, then what was found across windows.
pub fn report_text(report: &OverlapReport, lang: Lang) -> String {
    let t = &report.thresholds;
    let mut out = line(
        t!(
            "inspect.header",
            idle = t.idle_gap_ms.to_string(),
            launch = t.launch_gap_ms.to_string(),
            b2b = t.back_to_back_ms.to_string(),
            small = t.small_kernel_ms.to_string(),
            many = t.many_small_kernels,
            late = t.late_rank_ms.to_string(),
            ahead = t.cpu_ahead_ms.to_string()
        ),
        lang,
    );
    if !report.host_calls_recorded {
        out += &line(t!("inspect.no_host_calls"), lang);
    }
    if report.windows.is_empty() {
        out += &line(t!("inspect.none"), lang);
    }
    for window in &report.windows {
        out += &window_text(window, lang);
    }
    if report.range_names_left_out > 0 {
        let n = report.range_names_left_out;
        out += &line(t!("inspect.ranges_left_out", n, max = MAX_RANGE_NAMES), lang);
    }
    for name in &report.ranges_not_found {
        out += &line(t!("inspect.range_not_found", range = format!("\"{name}\"")), lang);
    }
    for r in &report.ranges_whole {
        out += &whole_text(r, lang);
    }
    for f in &report.across_windows {
        out += &line(t!("inspect.across"), lang);
        out += &finding_text(f, lang);
    }
    for s in &report.stragglers {
        let text = t!(
            "inspect.straggler",
            pid = s.pid,
            device = s.device,
            late = s.late_in,
            more = s.also_last_in,
            of = s.of,
            median = fixed(s.median_late_ms, 3),
            waited = fixed(s.others_waited_ms, 3)
        );
        out += &format!("  {}", line(text, lang));
    }
    if !report.stragglers.is_empty() {
        out += &format!("    {}", line(t!("inspect.matched_by_order"), lang));
    }
    out
}
