"""RESULTS.md and its plots, from the runner's results."""
from __future__ import annotations

import pathlib
from typing import Dict, List


def _mib(b):
    return f"{b / 2**20:.1f} MiB"


def _per_value(files_per_value) -> str:
    """'1 (1499 files), 0 (1 file)'; older results stored the set of values."""
    if isinstance(files_per_value, list):
        return "= " + ", ".join(map(str, files_per_value))
    return ", ".join(f"{v} ({n} file{'s' if n != 1 else ''})" for v, n in files_per_value.items())


def _spread(r) -> str:
    lo_hi = r.get("overhead_range")
    if not lo_hi:
        return ""
    return (f" (median of {r['config'].get('overhead_pairs', 1)} interleaved pairs; "
            f"{100 * lo_hi[0]:+.1f} % to {100 * lo_hi[1]:+.1f} %)")


def plots(results: List[Dict], outdir: pathlib.Path) -> Dict[str, str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    outdir.mkdir(parents=True, exist_ok=True)
    files = {}
    for r in results:
        study, runs, st = r["config"]["study"], r["runs"], r["staging"]
        labels = ["before", "recommended", "under 2 MB"]
        keys = [k for k in runs if k.endswith("readers")] + ["recommended", "under 2 MB"]
        fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
        axes[0].bar(labels, [runs[k]["bandwidth"] / 2**20 for k in keys], color=["#9e9e9e", "#1565c0", "#ef6c00"])
        axes[0].set_ylabel("input bandwidth (MiB/s)")
        axes[1].bar(labels, [runs[k]["step_time"] * 1e3 for k in keys], color=["#9e9e9e", "#1565c0", "#ef6c00"])
        axes[1].set_ylabel("median step time (ms)")
        x = range(2)
        axes[2].bar([i - 0.2 for i in x], [100 * st[k]["predicted_gain"] for k in ("recommended", "under 2 MB")],
                    width=0.4, label="predicted", color="#90caf9")
        axes[2].bar([i + 0.2 for i in x], [100 * st[k]["achieved_gain"] for k in ("recommended", "under 2 MB")],
                    width=0.4, label="achieved", color="#1565c0")
        axes[2].set_xticks(list(x), ["recommended", "under 2 MB"])
        axes[2].axhline(19, color="#c62828", linestyle="--", linewidth=1, label="paper: +19 %")
        axes[2].set_ylabel("bandwidth gain (%)")
        axes[2].legend(fontsize=8)
        fig.suptitle(f"{study}-like: slow shared tier, then staged to /dev/shm")
        fig.tight_layout()
        name = f"{study}.png"
        fig.savefig(outdir / name, dpi=100)
        plt.close(fig)
        files[study] = name
    return files


def markdown(results: List[Dict], command: str, images: Dict[str, str], elapsed: float) -> str:
    out = ["# Case studies: results", "",
           "Produced by the runner on this kind of machine (2 cores, 24 GiB, Debian 12, TensorFlow 2.21 CPU) "
           f"in {elapsed / 60:.1f} minutes with:", "", f"    {command}", "",
           "The slow tier is a FUSE file system over the local disk that adds a fixed latency to every lookup, "
           "open and read request and caps the shared read bandwidth (direct I/O, so no page cache); the fast "
           "tier is `/dev/shm`. Input bandwidth is bytes read over the time spent in read and metadata calls "
           "on the data set's files (Darshan's I/O performance estimate). The fast tier's budget is 10 % of "
           "the data set's bytes.", ""]
    for r in results:
        c, f, runs, st = r["config"], r["findings"], r["runs"], r["staging"]
        slow, fast = r["tiers"]["slow"], r["tiers"]["fast"]
        out += [f"## {c['study']}-like ({c['files']} files, {_mib(r['dataset_bytes'])})", "",
                f"![{c['study']}]({'results/' + images[c['study']]})", "",
                "Tiers, as `tfdarshan probe` measured them:", "",
                "| tier | open | read request | bandwidth |", "|---|---|---|---|",
                f"| slow (FUSE) | {slow['open_latency'] * 1e3:.2f} ms | {slow['read_latency'] * 1e3:.3f} ms | "
                f"{slow['bandwidth'] / 2**20:.0f} MiB/s |",
                f"| fast (/dev/shm) | {fast['open_latency'] * 1e6:.1f} µs | {fast['read_latency'] * 1e6:.2f} µs | "
                f"{fast['bandwidth'] / 2**20:.0f} MiB/s |", "",
                "Findings (the paper's observations, measured):", "",
                f"- every file opened once per epoch: opens per file {_per_value(f['opens_per_file'])}",
                f"- a zero-length read after every file: zero-byte reads per file "
                f"{_per_value(f['zero_reads_per_file'])}",
                f"- reads under 100 bytes: {f['reads_under_100']} of {f['reads']} "
                f"({100 * f['share_under_100']:.0f} %), all of them the end-of-file reads",
                f"- sequential reads: {100 * f['sequential']:.0f} %; mean request "
                f"{f['mean_request'] / 1024:.0f} KiB",
                f"- more parallel reads: one reader {runs['1 reader']['wall']:.1f} s per epoch at "
                f"{runs['1 reader']['bandwidth'] / 2**20:.0f} MiB/s; {c['readers']} readers "
                f"{runs[str(c['readers']) + ' readers']['wall']:.1f} s at "
                f"{runs[str(c['readers']) + ' readers']['bandwidth'] / 2**20:.0f} MiB/s",
                f"- the advisor's findings: {'; '.join(r['findings_advisor']) or 'none'}",
                f"- profiling overhead (epoch with vs without tfdarshan, {c['readers']} readers): "
                f"{100 * r['overhead']:+.1f} %{_spread(r)}", "",
                "| run | epoch | median step | input bandwidth |", "|---|---|---|---|"]
        for k, v in runs.items():
            if k == "unprofiled":
                out.append(f"| {k} | {v['wall']:.2f} s | – | – |")
            else:
                out.append(f"| {k} | {v['wall']:.2f} s | {v['step_time'] * 1e3:.1f} ms | "
                           f"{v['bandwidth'] / 2**20:.1f} MiB/s |")
        out += ["", "| staged | files | bytes | predicted gain | achieved gain |", "|---|---|---|---|---|"]
        for k, v in st.items():
            out.append(f"| {k} | {v['files']} | {_mib(v['bytes'])} | {100 * v['predicted_gain']:+.1f} % | "
                       f"{100 * v['achieved_gain']:+.1f} % |")
        out.append("")
    return "\n".join(out) + "\n"
