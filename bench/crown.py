"""CROWN vs IBP: time and output width side by side (not a test).

The tightness networks of ``experiments.tightness`` (six-node, 784-256-256-10 MLP, small
CNN on 28x28): for each radius, seconds and mean output width of ibp / crown-ibp /
crown in interval:float64, and the width ratio to IBP.

Run: ``python bench/crown.py``.
"""
from __future__ import annotations

import pandas as pd

from scalarlab.experiments import tightness as T


def main():
    df = T.tightness_table(samples=100, methods=("ibp", "crown-ibp", "crown"))
    base = df[df["method"] == "ibp"].set_index(["network", "radius"])
    df["time_vs_ibp"] = [r.seconds / base.loc[(r.network, r.radius), "seconds"]
                         for r in df.itertuples()]
    df["width_vs_ibp"] = [r.width / base.loc[(r.network, r.radius), "width"]
                          for r in df.itertuples()]
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(df[["network", "radius", "method", "width", "width_vs_ibp", "seconds",
                  "time_vs_ibp", "outside"]].to_string(index=False))


if __name__ == "__main__":
    main()
