#!/usr/bin/env bash
# Decision latency from outside the consumer (docs/bandits.md, "Decision
# latency at 2,000 decisions/s"): the broker (cmd/broker, its log on disk), the
# consumer (cmd/consumer with consumer.yaml) and the librdkafka feeder and
# reader of decisions.py, each a process of its own. Run by hand, never by
# make test; needs Debian's python3-confluent-kafka.
#
#   bench/outside/run.sh [SECONDS]     # default 60
#
# Prints the load average before and after, the consumer process's CPU time,
# the feeder's summary and the reader's figures (JSON).
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work" /tmp/outside-decisions-state' EXIT
/usr/bin/python3 -c 'import confluent_kafka' 2>/dev/null || { echo "needs python3-confluent-kafka (apt-get install python3-confluent-kafka)" >&2; exit 2; }
go build -o "$work/broker" ./cmd/broker
go build -o "$work/consumer" ./cmd/consumer
rm -rf /tmp/outside-decisions-state
"$work/broker" -config bench/outside/consumer.yaml -port 19092 -partitions 4 -data-dir "$work/log" >"$work/broker.log" 2>&1 &
sleep 1
"$work/consumer" -config bench/outside/consumer.yaml >"$work/consumer.log" 2>&1 &
consumer=$!
sleep 3
/usr/bin/python3 bench/outside/decisions.py read >"$work/read.json" 2>"$work/read.err" &
reader=$!
sleep 2
read -r l0 _ </proc/loadavg
/usr/bin/python3 bench/outside/decisions.py feed -seconds "$seconds" 2>"$work/feed.json" || { echo "feeder failed:" >&2; cat "$work/feed.json" >&2; exit 1; }
wait "$reader" || { echo "reader failed:" >&2; cat "$work/read.err" >&2; exit 1; }
read -r l1 _ </proc/loadavg
cpu=$(awk -v hz="$(getconf CLK_TCK)" '{print ($14+$15)/hz}' "/proc/$consumer/stat")
echo "load average (1 min) $l0 -> $l1; consumer process CPU ${cpu} s"
cat "$work/feed.json" "$work/read.json"
