package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/internal/synth"
	"github.com/kernelstream/kernelstream/internal/testbin"
	"github.com/kernelstream/kernelstream/internal/wire"
)

// TestOutputEqualsEvalDump is the equivalence contract of issue 3: for a
// stream of several keys, the predictions on the output topic, per key,
// equal what the real `eval -key KEY -dump` binary computes on that key's
// records (to 1e-12), with labels inline and with labels delayed (each
// label comes after other keys' records but before its own key's next x,
// which is the order in which eval's predict-then-update sees them).
func TestOutputEqualsEvalDump(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	dir := t.TempDir()
	evalBin := filepath.Join(testbin.Build(t, "../..", "consumer-eval", "./cmd/eval"), "eval")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := broker.Start(broker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	addr := b.Addrs()[0]

	const keys, rounds, partitions = 5, 300, 3
	// Round-robin over the keys: every key's e-th example before any key's (e+1)-th.
	perKey, order := examplesPerKey(t, keys, rounds, 21)

	for _, c := range []struct {
		name, algorithm, params string
		delayed                 bool
	}{
		{"inline/aogd-ald", "aogd-ald", `{"max_budget":64}`, false},
		{"delayed/aogd-ald", "aogd-ald", `{"max_budget":64}`, true},
		{"delayed/nons-ald", "nons-ald", `{"max_budget":64}`, true},
		// fogd draws its random frequencies from the per-key seed: equal
		// outputs show that eval -key derives the seed as the consumer does.
		{"delayed/fogd", "fogd", `{"D":64}`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			topic := strings.NewReplacer("/", "-").Replace(c.name)
			in, out, dlq := "in-"+topic, "out-"+topic, "dlq-"+topic
			if err := b.CreateTopics(ctx, partitions, in, out, dlq); err != nil {
				t.Fatal(err)
			}
			var msgs []kafka.Message
			for r := 0; r < rounds; r++ {
				for _, k := range order {
					e := perKey[k][r]
					msgs = append(msgs, kafka.Message{Key: []byte(k), Value: record(e, !c.delayed)})
				}
				if c.delayed {
					for _, k := range order {
						e := perKey[k][r]
						msgs = append(msgs, kafka.Message{Key: []byte(k), Value: []byte(fmt.Sprintf(`{"id":%q,"y":%s}`, e.ID(), num(e.Y)))})
					}
				}
			}
			produceMessages(ctx, t, addr, in, msgs)

			cfgBody := strings.Replace(fmtConfig(addr, "eq-"+topic, out, dlq, filepath.Join(dir, topic), ""), "input_topic: features", "input_topic: "+in, 1)
			cfgBody = strings.Replace(cfgBody, "algorithm: aogd-ald", "algorithm: "+c.algorithm, 1)
			cfgBody = strings.Replace(cfgBody, "params: {max_budget: 64}", "params: "+c.params, 1)
			cfg := writeConfig(t, dir, topic+".yaml", cfgBody)
			p := startConsumer(t, cfg, filepath.Join(dir, topic+".log"))
			for {
				ok, err := caughtUp(ctx, addr, "eq-"+topic, in, partitions)
				if err == nil && ok {
					break
				}
				select {
				case err := <-p.done:
					t.Fatalf("consumer exited (%v):\n%s", err, tail(p.log, 3000))
				case <-ctx.Done():
					t.Fatalf("consumer did not catch up:\n%s", tail(p.log, 3000))
				case <-time.After(100 * time.Millisecond):
				}
			}
			if code := p.stop(t, syscall.SIGTERM, crashGrace); code != 0 {
				t.Fatalf("exit %d:\n%s", code, tail(p.log, 3000))
			}

			got := map[string]float64{}
			outs, err := broker.ReadAll(ctx, b.Addrs(), out)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range outs {
				var o wire.Output
				if err := json.Unmarshal(m.Value, &o); err != nil || o.YHat == nil {
					t.Fatalf("output %s: %v", m.Value, err)
				}
				got[o.ID.String()] = *o.YHat
			}
			if len(got) != keys*rounds {
				t.Fatalf("%d distinct predictions, want %d", len(got), keys*rounds)
			}

			spec := fmt.Sprintf(`{"algorithm":%q,"dim":5,"kernel":{"type":"gaussian","sigma":1},"params":%s,"seed":3}`, c.algorithm, c.params)
			worst := 0.0
			for _, k := range order {
				dump := evalDump(t, evalBin, dir, spec, k, perKey[k])
				for i, e := range perKey[k] {
					d := math.Abs(got[e.ID()] - dump[i])
					worst = math.Max(worst, d)
					if d > 1e-12 {
						t.Fatalf("key %s record %d: consumer %v, eval %v", k, i, got[e.ID()], dump[i])
					}
				}
			}
			t.Logf("%d predictions equal eval -key -dump (max difference %g)", len(got), worst)
		})
	}
}

// examplesPerKey draws rounds examples for each of keys keys from the
// "mixed" synthetic stream of seed (dimension 5), and the keys in order.
func examplesPerKey(t *testing.T, keys, rounds int, seed uint64) (map[string][]synth.Example, []string) {
	t.Helper()
	src, err := synth.New("mixed", synth.Options{Keys: keys, Dim: 5, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	perKey := map[string][]synth.Example{}
	for len(perKey) < keys || minLen(perKey) < rounds {
		var e synth.Example
		if !src.Next(&e) {
			t.Fatal("synthetic stream ended")
		}
		if len(perKey[e.Key]) < rounds {
			e.X = append([]float64(nil), e.X...)
			perKey[e.Key] = append(perKey[e.Key], e)
		}
	}
	return perKey, src.Keys()
}

func minLen(m map[string][]synth.Example) int {
	n := math.MaxInt
	for _, v := range m {
		n = min(n, len(v))
	}
	return n
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func record(e synth.Example, withY bool) []byte {
	xs := make([]string, len(e.X))
	for i, v := range e.X {
		xs[i] = num(v)
	}
	if withY {
		return []byte(fmt.Sprintf(`{"id":%q,"x":[%s],"y":%s}`, e.ID(), strings.Join(xs, ","), num(e.Y)))
	}
	return []byte(fmt.Sprintf(`{"id":%q,"x":[%s]}`, e.ID(), strings.Join(xs, ",")))
}

// evalDump writes key's records as LIBSVM, runs eval -key -dump on them and
// returns y_hat per record.
func evalDump(t *testing.T, bin, dir, spec, key string, ex []synth.Example) []float64 {
	t.Helper()
	data := filepath.Join(dir, key+".libsvm")
	var sb strings.Builder
	for _, e := range ex {
		sb.WriteString(num(e.Y))
		for j, v := range e.X {
			if v != 0 {
				fmt.Fprintf(&sb, " %d:%s", j+1, num(v))
			}
		}
		sb.WriteByte('\n')
	}
	if err := os.WriteFile(data, []byte(sb.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	dumpPath := filepath.Join(dir, key+".dump")
	cmd := exec.Command(bin, "-data", data, "-model", spec, "-key", key, "-dump", dumpPath, "-quiet")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("eval: %v\n%s", err, out)
	}
	f, err := os.Open(dumpPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var yhat []float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		v, err := strconv.ParseFloat(fields[2], 64)
		if err != nil {
			t.Fatal(err)
		}
		yhat = append(yhat, v)
	}
	if len(yhat) != len(ex) {
		t.Fatalf("eval dumped %d records, want %d", len(yhat), len(ex))
	}
	return yhat
}
