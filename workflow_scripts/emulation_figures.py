"""Figures 2-7 of the zero-shot paper (rules emulation_figure2 ... emulation_figure7)."""

from traintime.core.specs import load_specs
from traintime.core.workflow import run_script
from traintime.emulation import analysis as A
from traintime.emulation import plots
from traintime.emulation import tables as T
from traintime.emulation.mapping import (
    landscape,
    nearest_point,
    oracle,
    spec_mapping,
    sweep_points,
)
from traintime.emulation.traces import evaluation_slice, load_traces


def _points(snakemake, specs, cfg):
    host = A.read_host_table(snakemake.input.rows)
    if host.empty:
        return host
    pts = sweep_points(host, specs)
    return pts[pts["backend"] == cfg["mapping_backend"]]


def main(snakemake):
    cfg, which, path = snakemake.params.cfg, snakemake.params.figure, snakemake.output[0]
    fig = cfg["figures"]
    specs = load_specs(snakemake.params.gpu_specs)
    slice_txt = f"{cfg['precision']}, batch {cfg['batch_size']}"
    if which in ("figure2", "figure3"):
        traces = evaluation_slice(load_traces(snakemake.input.traces), None, None, cfg["include_cleanup"],
                                  cfg["exclude_models"])
        pts = _points(snakemake, specs, cfg)
        if which == "figure2":
            plots.figure2(traces, pts, path, specs, fig["landscape_models"][0], fig["img_px"], cfg["batch_size"],
                          cfg["precision"], no_host_message=A.NO_HOST)
            return
        if pts.empty:
            plots.placeholder(path, "Figure 3: error landscapes over (clock, SM share)", A.NO_HOST)
            return
        orc = oracle(pts, traces)
        grids = []
        for host in sorted(pts["host_gpu"].unique())[:1]:
            hp = pts[pts["host_gpu"] == host]
            for gpu in fig["landscape_targets"]:
                m = spec_mapping(host, [gpu], specs, cfg["mapping_backend"], hp["clock_mhz"].unique()).iloc[0]
                spec_pt = nearest_point(hp["p_pct"], hp["clock_mhz"], m["p_pct"], m["clock_mhz"])
                for model in fig["landscape_models"]:
                    try:
                        grid = landscape(hp, traces, gpu, model, fig["img_px"], cfg["batch_size"], cfg["precision"])
                    except Exception:  # workload not measured or OOM on the target
                        continue
                    if grid.empty:
                        continue
                    o = orc[(orc["gpu"] == gpu) & (orc["model"] == model) & (orc["img_px"] == fig["img_px"])
                            & (orc["batch_size"] == cfg["batch_size"]) & (orc["precision"] == cfg["precision"])]
                    opt = (float(o["p_pct"].iloc[0]), float(o["clock_mhz"].iloc[0])) if not o.empty else None
                    grids.append((gpu, model, grid, opt, spec_pt))
        if not grids:
            plots.placeholder(path, "Figure 3: error landscapes over (clock, SM share)",
                              "host measurements present, but none of the configured landscape workloads "
                              "(config emulation.figures) was swept")
            return
        plots.figure3(grids, path, f"|log(t_host / t_target)| landscapes ({slice_txt}, {fig['img_px']}px); "
                                   "red: oracle, orange: spec-mapped")
        return
    pred = A.read_predictions(snakemake.input.predictions)
    main_pred = T.main_slice(pred, cfg["precision"], cfg["batch_size"])
    absent = [m for m in T.missing_notes(pred["method"].unique()) if m != "emulation_oracle"]
    missing = ("not shown (no host measurements / op profiles): " + ", ".join(T.method_label(m) for m in absent)
               if absent else "")
    note = f"{slice_txt}; {missing}" if missing else slice_txt
    if which == "figure4":
        plots.figure4(main_pred, path, fig["bar_targets"], fig["bar_models"], fig["img_px"], slice_txt)
    elif which == "figure5":
        plots.figure5(A.threshold_shares(main_pred), path, note=note)
    elif which == "figure6":
        plots.figure6(T.bias_table(main_pred, specs), path, note=note)
    elif which == "figure7":
        grid = A.grid_mape(pred)
        extra = "learned baseline: main slice only" if "learned" in set(grid["method"]) else ""
        plots.figure7(grid, path, note="; ".join(x for x in (extra, missing) if x))
    else:
        raise ValueError(f"unknown figure {which}")


if __name__ == "__main__":
    run_script(main, "emulation_figure2", globals())
