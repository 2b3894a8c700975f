"""Advice as text, JSON or a self-contained HTML page with plots; per-node plans and a
staged run's comparison with its baseline as text."""
from __future__ import annotations

import base64
import html
import io
import json

import numpy as np

from tfdarshan.advice import job_time
from tfdarshan.advice.advisor import Advice
from tfdarshan.advice.compare import served_label
from tfdarshan.advice.findings import as_dicts
from tfdarshan.measures.human import count, human_bytes, human_time
from tfdarshan.advice.per_node import NodePlans


def render_text(a: Advice) -> str:
    lines = [a.summary(), ""]
    if a.job_input_wait:
        lines += [a.job_input_wait["line"], ""]
    if a.plans:
        lines += [a.plans["report"], ""]
    sel = a.selection()
    if len(sel):
        lines.append("What to stage (grouped by dataset; each saving is out of the group's I/O time as the cost "
                     "model expects it, with the measured time beside it):")
        for r in sel.itertuples():
            lines.append(f"  {r.name}: {r.files} of {count(r.of_files, 'file')}, {human_bytes(r.bytes)}, "
                         f"saves {human_time(r.saving)} of {human_time(r.expected_time)} "
                         f"(measured {human_time(r.current_time)})")
    else:
        lines.append("Nothing worth staging: no file would read faster on the fast tier within the budget.")
    lines.append("")
    lines += rules_text(a)
    return "\n".join(lines + left_out_text(a.left_out) + findings_text(a.findings))


RULE_LABELS = (("under_2mb", "files under 2 MB, smallest first"), ("largest_time_first", "largest I/O time first"))


def rules_text(a: Advice) -> list:
    """The recommendation against the simple rules: in job time when the
    session has step series (what the plan optimises), the I/O time summed
    over threads and ranks beside it; and which one wins."""
    job = a.job["savings"] if a.job else None
    lines = ["Compared with simple rules (same budget)" + (", in job time (I/O time summed over threads and ranks "
                                                          "beside it):" if job else ", in I/O time summed over "
                                                          "threads (no step series to predict job time):")]

    def row(label, idx, key):
        saved = f"saves {human_time(job[key])} of job time ({human_time(a.saving(idx))} summed)" if job \
            else f"saves {human_time(a.saving(idx))}"
        return f"  {label}: {count(len(idx), 'file')}, {human_bytes(a.bytes(idx))}, {saved}"
    for name, label in RULE_LABELS:
        lines.append(row(label, a.baselines[name], name))
    lines.append(row("this recommendation", a.chosen, "chosen"))
    if job:
        best = max(RULE_LABELS, key=lambda r: job[r[0]])
        if job[best[0]] > job["chosen"] + 1e-9:
            lines.append(f"  the rule {best[1]!r} would shorten the job more, by "
                         f"{human_time(job[best[0]] - job['chosen'])}")
        elif job[best[0]] >= job["chosen"] - 1e-9:
            lines.append(f"  the rule {best[1]!r} shortens the job as much")
        else:
            lines.append(f"  this recommendation shortens the job more than either rule, by "
                         f"{human_time(job['chosen'] - job[best[0]])} or more")
    return lines


def left_out_text(left) -> list:
    """What staging did not consider, and why."""
    if not left:
        return []
    lines = ["", "Left out (not training input):"]
    for x in left:
        lines.append(f"  {x['files']} file{'s' if x['files'] != 1 else ''}, {human_bytes(x['bytes'])}: {x['reason']} "
                     f"(e.g. {', '.join(x['examples'])})")
    return lines


def findings_text(findings) -> list:
    if not findings:
        return []
    lines = ["", "Findings:"]
    for f in findings:
        lines.append(f"  [{f.level}] {f.title}")
        lines.append(f"      {f.detail}")
        lines.append(f"      suggested: {f.suggestion}")
    return lines


def render_node_plans(p: NodePlans, findings=()) -> str:
    """Per-node plans as text: one line a node, then sharded against replicated."""
    lines = [f"Per-node staging plans on {p.fast_tier.label}:"]
    for h, a in p.nodes.items():
        lines.append(f"  {h} ({count(p.ranks.get(h, 0), 'rank')}): stage {count(len(a.chosen), 'file')}, "
                     f"{human_bytes(a.bytes(a.chosen))} of {human_bytes(p.capacity[h])}; saves "
                     f"{human_time(p.saving(h))} of {human_time(a.current_time)} (replicated plan: "
                     f"{human_time(p.replicated_saving[h])})")
    lines += ["", p.summary()]
    return "\n".join(lines + findings_text(findings))


def render_json(a: Advice) -> str:
    return json.dumps(a.to_dict(), indent=1)


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def render_html(a: Advice) -> str:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    esc = html.escape
    figs = []
    # 1. predicted saving: ours against the simple rules
    fig, ax = plt.subplots(figsize=(6, 3))
    names = ["this recommendation", "files under 2 MB", "largest I/O time first"]
    vals = [a.saving(a.chosen), a.saving(a.baselines["under_2mb"]), a.saving(a.baselines["largest_time_first"])]
    ax.barh(names, vals, color=["#1565c0", "#9e9e9e", "#9e9e9e"])
    ax.set_xlabel("predicted saving of input I/O time (s)")
    figs.append(("Predicted saving under the same budget", _png(fig)))
    plt.close(fig)
    # 2. where the time goes now, per file, sorted
    if len(a.costs):
        fig, ax = plt.subplots(figsize=(6, 3))
        order = np.argsort(-a.costs["current_time"].to_numpy())
        chosen = np.isin(order, a.chosen)
        ax.bar(np.arange(len(order)), a.costs["current_time"].to_numpy()[order],
               color=np.where(chosen, "#1565c0", "#bdbdbd"), width=1.0)
        ax.set_xlabel("files, by I/O time now (blue: to stage)")
        ax.set_ylabel("seconds")
        figs.append(("I/O time per file", _png(fig)))
        plt.close(fig)
    rows = "".join(
        f"<tr><td>{esc(r.name)}</td><td>{r.files} of {r.of_files}</td><td>{esc(human_bytes(r.bytes))}</td>"
        f"<td>{esc(human_time(r.saving))}</td></tr>" for r in a.selection().itertuples())
    findings = "".join(
        f"<li><b>[{esc(f.level)}] {esc(f.title)}</b><br>{esc(f.detail)}<br><i>Suggested:</i> "
        f"{esc(f.suggestion)}</li>" for f in a.findings)
    images = "".join(f"<h3>{esc(t)}</h3><img alt='{esc(t)}' src='data:image/png;base64,{p}'>" for t, p in figs)
    return f"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>tfdarshan staging advice</title>
<style>body{{font-family:sans-serif;max-width:960px;margin:2em auto}}td,th{{padding:4px 8px;text-align:left}}
table{{border-collapse:collapse}}tr:nth-child(even){{background:#f4f4f4}}</style></head><body>
<h1>Staging advice</h1><p>{esc(a.summary())}</p>
<h2>What to stage</h2><table><tr><th>dataset</th><th>files</th><th>size</th><th>predicted saving</th></tr>{rows}</table>
<h2>Findings</h2><ul>{findings or "<li>none</li>"}</ul>{images}</body></html>"""


def render_node_plans_json(p: NodePlans, findings=()) -> str:
    return json.dumps({**p.to_dict(), "findings": as_dicts(findings)}, indent=1)


def compare_text(r) -> str:
    """--compare in words: what the user waits for, then the I/O time."""
    w = r["wall"]

    def change(k, what):
        b, a, c = w[k]["before"], w[k]["after"], w[k]["change"]
        if b is None or a is None:
            return f"{what}: unknown (no step markers in {'BEFORE' if b is None else 'AFTER'})"
        return f"{what} {human_time(b)} -> {human_time(a)} ({100 * c:+.0f} %)" if c is not None else \
            f"{what} {human_time(b)} -> {human_time(a)}"
    steps = w["steps"]
    lines = [job_text(r["job"]),
             change("step_time", "step time (median step; each step's slowest process)"),
             change("training_time", f"training time (all steps: {steps['before']} before, {steps['after']} after)"),
             change("window_time", "window (the whole profiled span)")]
    ratio = (f"{r['achieved_over_predicted']:.2f} of the prediction of {human_time(r['predicted_saving'])}"
             if r["predicted_saving"] is not None else "the manifest holds no prediction")
    lines.append(f"staged files' I/O time, summed over threads and ranks (it can exceed the wall time it overlaps): "
                 f"{human_time(r['before_time'])} before, {human_time(r['after_time'])} after "
                 f"({r['copies_read']} of {count(r['staged_files'], 'copy', 'copies')} read); saved {human_time(r['achieved_saving'])}, "
                 f"{ratio}; input bandwidth {r['bandwidth_before'] / 2**20:.0f} -> {r['bandwidth_after'] / 2**20:.0f} MiB/s")
    if r["served"]["staged"] is not None:
        lines.append(served_label(r["served"]))
    return "\n".join(lines)


def job_text(j) -> str:
    """--compare's first line: the job time saved against the plan's prediction."""
    if j["before"] is None or j["after"] is None:
        return f"job time: unknown (no training steps in {'BEFORE' if j['before'] is None else 'AFTER'})"
    said = (f"predicted {human_time(j['predicted'])}; achieved/predicted {j['ratio']:.2f}" if j["ratio"] is not None
            else f"predicted {human_time(j['predicted'])}" if j["predicted"] is not None
            else "the manifest holds no job-time prediction (planned without step series)")
    crowded = job_time.shared_cores_line(j.get("shared_cores"))
    return (f"job time {human_time(j['before'])} -> {human_time(j['after'])}: saved {human_time(j['achieved'])}, "
            f"{said} ({job_time.MODES[j['mode']]})" + (f". {crowded}" if crowded else ""))
