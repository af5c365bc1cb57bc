#!/usr/bin/python3
"""The raw-stream peer of issue 12: a scikit-learn pipeline run one sample at
a time, predicting before learning, on a shuffled LIBSVM file.

  StandardScaler.partial_fit on the features (statistics before the sample),
  online standardisation of a regression target (Welford),
  RBFSampler(gamma=1/d, n_components=400), SGDRegressor / SGDClassifier with
  their defaults.

Run by hand (never by make test), with Debian's scikit-learn:
  apt-get install python3-sklearn
  /usr/bin/python3 bench/peer/peer.py -data ../shared/data/cpusmall.libsvm -shuffle 1
Prints one JSON object: n, mse or mistake_rate, seconds (the loop only).
The shuffle is numpy's (seeded), not eval's permutation: the two tools see
the same records in different orders, so compare averages, not records.
"""
import argparse
import json
import math
import time

import numpy as np
from sklearn.datasets import load_svmlight_file
from sklearn.kernel_approximation import RBFSampler
from sklearn.linear_model import SGDClassifier, SGDRegressor
from sklearn.preprocessing import StandardScaler


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-data", required=True)
    ap.add_argument("-shuffle", type=int, default=1)
    ap.add_argument("-limit", type=int, default=0)
    a = ap.parse_args()
    X, y = load_svmlight_file(a.data)
    X = X.toarray()
    classify = set(np.unique(y)) <= {-1.0, 0.0, 1.0}
    if classify:
        y = np.where(y > 0, 1.0, -1.0)
    perm = np.random.RandomState(a.shuffle).permutation(len(y))
    X, y = X[perm], y[perm]
    if a.limit:
        X, y = X[: a.limit], y[: a.limit]
    n, d = X.shape
    rbf = RBFSampler(gamma=1.0 / d, n_components=400, random_state=a.shuffle).fit(np.zeros((1, d)))
    scaler = StandardScaler()
    model = SGDClassifier() if classify else SGDRegressor()
    ym, ym2, yn = 0.0, 0.0, 0
    se, mistakes, fitted = 0.0, 0, False
    start = time.perf_counter()
    for i in range(n):
        x = X[i : i + 1]
        z = scaler.transform(x) if fitted else x - x  # no statistics yet: zeros
        f = rbf.transform(np.nan_to_num(z))
        if classify:
            p = model.decision_function(f)[0] if fitted else 0.0
            mistakes += (1.0 if p >= 0 else -1.0) != y[i]
            model.partial_fit(f, y[i : i + 1], classes=[-1.0, 1.0])
        else:
            sd = math.sqrt(ym2 / yn) if yn >= 2 and ym2 > 0 else 1.0
            p = (model.predict(f)[0] * sd + ym) if fitted else ym
            se += (p - y[i]) ** 2
            model.partial_fit(f, np.array([(y[i] - ym) / sd]))
            yn += 1
            dlt = y[i] - ym
            ym += dlt / yn
            ym2 += dlt * (y[i] - ym)
        scaler.partial_fit(x)
        fitted = True
    secs = time.perf_counter() - start
    out = {"data": a.data, "n": n, "seconds": secs}
    if classify:
        out["mistake_rate"] = mistakes / n
    else:
        out["mse"] = se / n
    print(json.dumps(out))


if __name__ == "__main__":
    main()
