#!/usr/bin/python3
"""Decision latency measured from outside the consumer: make bench-decisions'
load (users choosing among candidates of dimension 16 with 4 decimals, each
decision's reward written back before the user's next decision) fed and read
by librdkafka clients in processes of their own, against a consumer process
and a broker process (docs/scale.md, "Decision latency").

Two roles, each its own process:

  feed    writes decisions at -rate per second for -seconds, paced every 3 ms,
          each record's timestamp set to its write time (milliseconds); the
          decision id carries that time, so the reader needs no shared state.
  read    reads the outputs, writes each decision's reward back (a click with
          a probability that depends on the user and the chosen item), and at
          the end prints one JSON object: latency = the output's timestamp -
          the input's (both as Kafka keeps them, milliseconds), p50 / p99 / max
          after -warmup seconds, the p99 of each 5-second window, and how many
          decisions were answered.

Run by hand (never by make test), with Debian's librdkafka binding
(apt-get install python3-confluent-kafka): bench/outside/run.sh [SECONDS]
starts the broker and consumer processes and both roles, which amounts to
  go run ./cmd/broker -config bench/outside/consumer.yaml -port 19092 -data-dir DIR &
  go run ./cmd/consumer -config bench/outside/consumer.yaml &
  /usr/bin/python3 bench/outside/decisions.py read &
  /usr/bin/python3 bench/outside/decisions.py feed
"""
import argparse
import json
import math
import random
import sys
import time

from confluent_kafka import Consumer, Producer


def items(n, dim, decimals, seed):
    """The catalogue: n items, each pre-encoded as its arm JSON."""
    r = random.Random(seed)
    vecs = [[round(r.uniform(-1, 1), decimals) for _ in range(dim)] for _ in range(n)]
    arms = ['{"id":"item-%03d","x":[%s]}' % (i, ",".join("%.*f" % (decimals, v) for v in vec))
            for i, vec in enumerate(vecs)]
    return vecs, arms


def taste(user, dim):
    """A user's hidden preference (the same in both processes)."""
    r = random.Random(1_000_003 * user + 17)
    return [r.gauss(0, 1) / math.sqrt(dim) for _ in range(dim)]


def warm_up(p, a):
    """Makes the producer ready before the clock starts: its metadata and its
    idempotent producer id, which librdkafka fetches at the first write, took
    up to 1 s that the first records' timestamps then carried. The warm-up
    record goes to -warm-topic (the consumer's dead-letter topic by default),
    which the consumer does not read."""
    p.list_topics(a.input, timeout=10)
    p.produce(a.warm_topic, value=b'{"warm-up":true}', key=b"warm-up")
    p.flush(10)


def feed(a):
    _, arms = items(a.items, a.dim, a.decimals, a.seed)
    p = Producer({"bootstrap.servers": a.brokers, "linger.ms": 0, "acks": "all",
                  "enable.idempotence": True, "queue.buffering.max.messages": 1_000_000})
    warm_up(p, a)
    r = random.Random(a.seed)
    n = int(a.rate * a.seconds)
    step = {}
    start = time.monotonic()
    sent, behind = 0, 0.0
    while sent < n:
        now = time.monotonic()
        due = min(n, int((now - start) * a.rate) + 1)
        behind = max(behind, now - start - sent / a.rate)
        while sent < due:
            u = r.randrange(a.users)
            t = step.get(u, 0)
            step[u] = t + 1
            ts = int(time.time() * 1000)
            first = r.randrange(a.items)
            stride = 1 + 2 * r.randrange(a.items // 2)  # odd: a permutation when items is a power of two or coprime
            cands = ",".join(arms[(first + k * stride) % a.items] for k in range(a.arms))
            value = '{"id":"u%d-%d-%d","arms":[%s]}' % (u, t, ts, cands)
            p.produce(a.input, value=value.encode(), key=b"user-%05d" % u, timestamp=ts)
            sent += 1
        p.poll(0)
        time.sleep(max(0.0, start + sent / a.rate + a.every - time.monotonic()))
    p.flush(30)
    print(json.dumps({"fed": sent, "seconds": round(time.monotonic() - start, 1),
                      "feeder_behind_ms": round(behind * 1000, 1)}), file=sys.stderr)


def read(a):
    vecs, _ = items(a.items, a.dim, a.decimals, a.seed)
    c = Consumer({"bootstrap.servers": a.brokers, "group.id": "outside-reader-%d" % time.time_ns(),
                  "auto.offset.reset": "latest", "enable.auto.commit": False, "fetch.wait.max.ms": 5})
    c.subscribe([a.output])
    p = Producer({"bootstrap.servers": a.brokers, "linger.ms": 0, "acks": "all", "enable.idempotence": True})
    warm_up(p, a)
    r = random.Random(a.seed + 1)
    lat = []  # (input ms, latency ms)
    tastes = {}
    seen = set()
    idle_since = None
    first_in = None
    while True:
        m = c.poll(0.1)
        p.poll(0)
        if m is None:
            if first_in is not None and idle_since is not None and time.monotonic() - idle_since > a.idle:
                break
            if idle_since is None:
                idle_since = time.monotonic()
            continue
        if m.error():
            print("reader:", m.error(), file=sys.stderr)
            continue
        idle_since = time.monotonic()
        out = json.loads(m.value())
        did = out.get("id", "")
        if not did.startswith("u") or did in seen or "arm" not in out:
            continue
        seen.add(did)
        u, _, ts = (int(x) for x in did[1:].split("-"))
        out_ts = m.timestamp()[1]
        first_in = ts if first_in is None else min(first_in, ts)
        lat.append((ts, out_ts - ts))
        item = int(str(out["arm"]).rsplit("-", 1)[1])
        w = tastes.get(u) or tastes.setdefault(u, taste(u, a.dim))
        z = sum(wi * xi for wi, xi in zip(w, vecs[item]))
        reward = 1 if r.random() < 1 / (1 + math.exp(-3 * z)) else 0
        p.produce(a.input, key=m.key(), value=('{"id":"%s","reward":%d,"arm":"%s"}' % (did, reward, out["arm"])).encode())
    p.flush(30)
    c.close()
    warm = [l for t, l in lat if t - first_in >= a.warmup * 1000]
    warm.sort()
    windows = {}
    for t, l in lat:
        windows.setdefault((t - first_in) // 5000, []).append(l)

    def q(xs, f):
        return xs[min(len(xs) - 1, int(f * len(xs)))] if xs else None
    print(json.dumps({
        "answered": len(lat), "after_warmup": len(warm),
        "p50_ms": q(warm, 0.5), "p99_ms": q(warm, 0.99), "max_ms": warm[-1] if warm else None,
        "first_5s_max_ms": max((l for t, l in lat if t - first_in < a.warmup * 1000), default=None),
        "p99_per_5s_ms": [q(sorted(ws), 0.99) for _, ws in sorted(windows.items())],
    }))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["feed", "read"])
    ap.add_argument("-brokers", default="127.0.0.1:19092")
    ap.add_argument("-input", default="decisions")
    ap.add_argument("-output", default="choices")
    ap.add_argument("-warm-topic", dest="warm_topic", default="decisions-dlq", help="where the producers' warm-up record goes")
    ap.add_argument("-rate", type=float, default=2000)
    ap.add_argument("-seconds", type=float, default=60)
    ap.add_argument("-every", type=float, default=0.003, help="feed: seconds between writes")
    ap.add_argument("-users", type=int, default=10000)
    ap.add_argument("-items", type=int, default=512)
    ap.add_argument("-arms", type=int, default=100)
    ap.add_argument("-dim", type=int, default=16)
    ap.add_argument("-decimals", type=int, default=4)
    ap.add_argument("-seed", type=int, default=1)
    ap.add_argument("-warmup", type=float, default=5, help="read: seconds left out of the figures")
    ap.add_argument("-idle", type=float, default=5, help="read: stop after this long without an output")
    a = ap.parse_args()
    feed(a) if a.role == "feed" else read(a)


if __name__ == "__main__":
    main()
